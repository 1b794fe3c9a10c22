-- retry_load: per service and sliding window, how much of its inbound load is retries (the edges'
-- `retries`: calls that repeat an earlier attempt of the same logical call, after a failure or while it
-- was in flight) and the worst amplification of any caller's calls into it. A service in a retry storm
-- shows a rising retry_share while its errors or latency rise. The end-to-end amplification along each
-- call path (the product over its edges) is in stormwatch_topology_snapshots' edges (path_amplification).
CREATE TEMPORARY VIEW retry_load AS
SELECT callee AS service, window_start_ms, window_end_ms, SUM(calls) AS calls, SUM(retries) AS retries,
       ROUND(CAST(SUM(retries) AS DOUBLE) / SUM(calls), 3) AS retry_share,
       ROUND(MAX(amplification), 2) AS max_amplification
FROM stormwatch_edges
WHERE window_kind = 'sliding' AND NOT callee_virtual AND calls > 0
GROUP BY callee, window_start_ms, window_end_ms;
