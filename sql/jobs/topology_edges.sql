-- Job topology, its edges: per service edge and window, what crossed it (views/edge_calls.sql).
-- Rendered once per window kind (jobs/topology.py): `sliding`, the windows of every other topology
-- output, and `tumbling`, [pipeline.topology] edge_tumbling_window_seconds long, a HOP whose slide is
-- its size, so each call is counted in exactly one window.

-- One PERCENTILE of an array of quantiles: a call per quantile would keep every latency once per call.
INSERT INTO stormwatch_edges
SELECT caller, callee, callee_virtual, '${edge_window_kind}', window_start_ms, window_end_ms, calls, client_errors, server_errors,
       q[1], q[2], q[3], bucket_bounds, latency_buckets, gap_ms, example_trace_id, example_error_trace_id
FROM (
  SELECT
    caller, callee, callee_virtual,
    EXTRACT(EPOCH FROM window_start) * 1000 AS window_start_ms, EXTRACT(EPOCH FROM window_end) * 1000 AS window_end_ms,
    COUNT(*) AS calls,
    SUM(CASE WHEN client_error THEN 1 ELSE 0 END) AS client_errors,
    SUM(CASE WHEN server_error THEN 1 ELSE 0 END) AS server_errors,
    PERCENTILE(latency_ms, ARRAY[0.5, 0.95, 0.99]) AS q,
    ARRAY[${latency_bucket_bounds_ms}] AS bucket_bounds,
    CUMULATIVE_COUNTS(latency_ms, ${latency_bucket_bounds_ms}) AS latency_buckets,
    COALESCE(SUM(gap_ms), 0.0) AS gap_ms,
    MIN(trace_id) AS example_trace_id,
    MIN(CASE WHEN client_error OR server_error THEN trace_id END) AS example_error_trace_id
  FROM TABLE(HOP(TABLE edge_calls, DESCRIPTOR(end_time), ${edge_window_slide}, ${edge_window_size}))
  GROUP BY window_start, window_end, caller, callee, callee_virtual
);
