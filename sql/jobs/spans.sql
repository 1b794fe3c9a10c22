-- Job spans, its SQL: the second phase of the window aggregation over the trace assembler's partials
-- (sql/views/trace_partials.sql), and the dead letters (edges: jobs/spans_edges.sql, per window kind).
-- Windows slide by [pipeline.topology] window_slide_seconds over window_size_seconds of event time; each
-- is the union of whole slide buckets, so merging the buckets' partials gives the window's figures.

-- A view: one stream that jobs/spans.py sends both to the sink and to the suspects ranker.
CREATE TEMPORARY VIEW service_windows_out AS
SELECT service_name AS service, window_start_ms, window_end_ms, spans, server_spans, errors, error_origins,
       errors_propagated, errors_absorbed, errors_surfaced,
       HISTOGRAM_QUANTILE(h, 0.5) AS server_p50_ms, HISTOGRAM_QUANTILE(h, 0.95) AS server_p95_ms,
       self_ms AS self_ms_total, inbound_calls, inbound_gap_ms AS inbound_gap_ms_total, orphans, self_parents,
       example_trace_id
FROM (
  SELECT
    service_name,
    EXTRACT(EPOCH FROM window_start) * 1000 AS window_start_ms, EXTRACT(EPOCH FROM window_end) * 1000 AS window_end_ms,
    SUM(spans) AS spans, SUM(server_spans) AS server_spans, SUM(errors) AS errors, SUM(error_origins) AS error_origins,
    SUM(errors_propagated) AS errors_propagated, SUM(errors_absorbed) AS errors_absorbed,
    SUM(errors_surfaced) AS errors_surfaced, MERGE_HISTOGRAMS(server_histogram) AS h,
    SUM(self_ms) AS self_ms, SUM(inbound_calls) AS inbound_calls, SUM(inbound_gap_ms) AS inbound_gap_ms,
    SUM(orphans) AS orphans, SUM(self_parents) AS self_parents, MIN(example_trace_id) AS example_trace_id
  FROM TABLE(HOP(TABLE service_partials, DESCRIPTOR(rowtime), ${window_slide}, ${window_size}))
  GROUP BY window_start, window_end, service_name
);
-- (jobs/spans.py inserts it into stormwatch_service_windows from the same stream the ranker reads.)

INSERT INTO stormwatch_error_breaks
SELECT absorbing_service, failing_service,
       EXTRACT(EPOCH FROM window_start) * 1000, EXTRACT(EPOCH FROM window_end) * 1000,
       SUM(breaks), MIN(example_trace_id)
FROM TABLE(HOP(TABLE break_partials, DESCRIPTOR(rowtime), ${window_slide}, ${window_size}))
GROUP BY window_start, window_end, absorbing_service, failing_service;

INSERT INTO stormwatch_latency_stages
SELECT service_name, span_name, span_kind, window_start_ms, window_end_ms, spans,
       duration_ms / spans, HISTOGRAM_QUANTILE(duration_h, 0.95), self_ms / spans, HISTOGRAM_QUANTILE(self_h, 0.95),
       example_trace_id
FROM (
  SELECT
    service_name, span_name, span_kind,
    EXTRACT(EPOCH FROM window_start) * 1000 AS window_start_ms, EXTRACT(EPOCH FROM window_end) * 1000 AS window_end_ms,
    SUM(spans) AS spans, SUM(duration_ms) AS duration_ms, SUM(self_ms) AS self_ms,
    MERGE_HISTOGRAMS(duration_histogram) AS duration_h, MERGE_HISTOGRAMS(self_histogram) AS self_h,
    MIN(example_trace_id) AS example_trace_id
  FROM TABLE(HOP(TABLE stage_partials, DESCRIPTOR(rowtime), ${window_slide}, ${window_size}))
  GROUP BY window_start, window_end, service_name, span_name, span_kind
);

-- Per instance and slide bucket, for the health job: each subtask's partial of the bucket as it is, and
-- after a bucket's partials the subtask's progress marks (service and instance NULL, bucket_start_ms =
-- bucket_end_ms = the boundary). No aggregate between: the sink is chained to its assembler subtask and
-- writes only into partitions of its own (WriterPartitioner, sql/tables/stormwatch_span_instances.sql),
-- so the health job's watermark per partition is the latest mark, and its windows close the moment the
-- span path's buckets do. The health job merges partials as it merges buckets.
INSERT INTO stormwatch_span_instances
SELECT k1, k2, bucket_start_ms,
       CASE WHEN kind = 'MARK' THEN bucket_start_ms ELSE bucket_start_ms + ${window_slide_ms} END,
       n[1], n[2], h1, b, ex1, ex2
FROM trace_partials
WHERE kind = 'INSTANCE' OR kind = 'MARK';

-- Spans the decoder rejected (with its reason), and those the assembler could not take: late (behind
-- its watermark), or of a trace already assembled.
INSERT INTO stormwatch_dead_letters
SELECT * FROM trace_dead_letters;
