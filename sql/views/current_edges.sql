-- current_edges: every service edge as of the newest window it had calls in, per window kind
-- (`sliding`: the last window_size_seconds; `tumbling`: the last edge_tumbling_window_seconds, each
-- call in one window only).
CREATE TEMPORARY VIEW current_edges AS
SELECT caller, callee, callee_virtual, window_kind, calls, client_errors, server_errors, retries,
       ROUND(amplification, 2) AS amplification,
       ROUND(latency_p50_ms, 1) AS p50_ms, ROUND(latency_p95_ms, 1) AS p95_ms, ROUND(latency_p99_ms, 1) AS p99_ms,
       window_end_ms, example_trace_id
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY caller, callee, window_kind ORDER BY window_end_ms DESC) AS newest
  FROM stormwatch_edges
)
WHERE newest = 1;
