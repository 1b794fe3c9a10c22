-- edge_calls: one row per call that crosses services, the unit every edge aggregate counts.
--  * a span whose parent is in another service: caller = the parent's service. CLIENT -> SERVER is
--    the usual pair; SERVER -> SERVER and CLIENT -> CLIENT (proxies, uninstrumented hops) count too.
--    INTERNAL spans never make an edge of their own: parent and child share the service.
--  * a root span: the caller is the virtual node `user`, unless it is a CONSUMER span with links
--    (then its callers are the services of the producers it links to, next).
--  * a span linked to a span of another service (messaging, views/span_links.sql): caller = the
--    linked (producer) span's service.
--  * a CLIENT span nobody answered: the callee is a virtual node named by its attributes.
-- latency_ms is the caller's view of the call where the caller's span is a CLIENT span (else the
-- callee's); gap_ms = client minus server time is the network and queueing between them.
-- A call belongs to the window of the caller's end: a call and the caller's exclusive time around
-- it then always fall into the same window, however long the network held the call.
CREATE TEMPORARY VIEW edge_calls AS
SELECT
  parent_service_name AS caller,
  service_name AS callee,
  FALSE AS callee_virtual,
  trace_id,
  parent_status_code = 'STATUS_CODE_ERROR' AS client_error,
  status_code = 'STATUS_CODE_ERROR' AS server_error,
  CASE WHEN parent_span_kind = 'SPAN_KIND_CLIENT' THEN parent_duration_ms ELSE duration_ms END AS latency_ms,
  CASE WHEN parent_span_kind = 'SPAN_KIND_CLIENT' AND span_kind = 'SPAN_KIND_SERVER'
       THEN GREATEST(parent_duration_ms - duration_ms, 0.0) END AS gap_ms,
  parent_end_time AS end_time
FROM span_parents
WHERE parent_found_span_id IS NOT NULL AND parent_service_name <> service_name
UNION ALL
SELECT 'user', service_name, FALSE, trace_id, FALSE, status_code = 'STATUS_CODE_ERROR', duration_ms,
       CAST(NULL AS DOUBLE), end_time
FROM span_parents
WHERE parent_span_id IS NULL AND NOT follows_links
UNION ALL
SELECT producer_service_name, service_name, FALSE, trace_id, producer_status_code = 'STATUS_CODE_ERROR',
       status_code = 'STATUS_CODE_ERROR', duration_ms, CAST(NULL AS DOUBLE), producer_end_time
FROM span_links
UNION ALL
SELECT service_name, callee, TRUE, trace_id, status_code = 'STATUS_CODE_ERROR', FALSE, duration_ms,
       CAST(NULL AS DOUBLE), end_time
FROM untraced_calls;
