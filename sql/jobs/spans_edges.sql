-- Job spans, its edges: per service edge and window, the merge of the assembler's edge partials
-- (sql/views/trace_partials.sql), as a view: jobs/spans.py inserts it into stormwatch_edges, and hands the sliding ones to the suspects ranker
-- as the same stream. Rendered once per window kind (jobs/spans.py): `sliding`, the windows
-- of every other output, and `tumbling`, [pipeline.topology] edge_tumbling_window_seconds long, a HOP
-- whose slide is its size, so each call is counted in exactly one window.
CREATE TEMPORARY VIEW ${edge_window_kind}_edges_out AS
SELECT caller, callee, callee_virtual, CAST('${edge_window_kind}' AS STRING) AS window_kind, window_start_ms, window_end_ms, calls,
       client_errors, server_errors, retries, calls - retries AS logical_calls,
       CAST(calls AS DOUBLE) / (calls - retries) AS amplification, HISTOGRAM_QUANTILE(h, 0.5) AS latency_p50_ms,
       HISTOGRAM_QUANTILE(h, 0.95) AS latency_p95_ms, HISTOGRAM_QUANTILE(h, 0.99) AS latency_p99_ms,
       bucket_bounds AS latency_bucket_bounds_ms, latency_buckets, gap_ms AS gap_ms_total, example_trace_id,
       example_error_trace_id
FROM (
  SELECT
    caller, callee, callee_virtual,
    EXTRACT(EPOCH FROM window_start) * 1000 AS window_start_ms, EXTRACT(EPOCH FROM window_end) * 1000 AS window_end_ms,
    SUM(calls) AS calls, SUM(client_errors) AS client_errors, SUM(server_errors) AS server_errors,
    SUM(retries) AS retries,
    MERGE_HISTOGRAMS(latency_histogram) AS h,
    CAST(ARRAY[${latency_bucket_bounds_ms}] AS ARRAY<DOUBLE>) AS bucket_bounds,
    SUM_ELEMENTS(latency_buckets, ${latency_bucket_count}) AS latency_buckets,
    SUM(gap_ms) AS gap_ms,
    MIN(example_trace_id) AS example_trace_id,
    MIN(example_error_trace_id) AS example_error_trace_id
  FROM TABLE(HOP(TABLE edge_partials, DESCRIPTOR(rowtime), ${edge_window_slide}, ${edge_window_size}))
  GROUP BY window_start, window_end, caller, callee, callee_virtual
);
