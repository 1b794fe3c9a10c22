-- service_facts: what each service's window record adds up, one fact a row, all on one event-time
-- column `t` so a single windowed aggregate sums them (sql/jobs/topology.sql).
--  * every span: counts, its duration (self time before its children are taken off), SERVER latency
--  * every parent: minus the time its children cover
--  * every error span whose parent is in error too: the parent's key, so origins (error spans none
--    of whose children failed) = errors - distinct such parents
--  * every CLIENT -> SERVER call into the service: the gap the caller saw on top of the server time
CREATE TEMPORARY VIEW service_facts AS
SELECT
  service_name, end_time AS t,
  1 AS spans,
  CASE WHEN span_kind = 'SPAN_KIND_SERVER' THEN 1 ELSE 0 END AS server_spans,
  CASE WHEN status_code = 'STATUS_CODE_ERROR' THEN 1 ELSE 0 END AS errors,
  CASE WHEN status_code = 'STATUS_CODE_ERROR' AND parent_found_span_id IS NOT NULL
        AND parent_status_code = 'STATUS_CODE_ERROR' THEN 1 ELSE 0 END AS errors_propagated,
  CASE WHEN status_code = 'STATUS_CODE_ERROR' AND parent_found_span_id IS NOT NULL
        AND parent_status_code <> 'STATUS_CODE_ERROR' THEN 1 ELSE 0 END AS errors_absorbed,
  CASE WHEN status_code = 'STATUS_CODE_ERROR' AND parent_span_id IS NULL THEN 1 ELSE 0 END AS errors_surfaced,
  CAST(NULL AS STRING) AS error_parent_key,
  duration_ms AS self_ms,
  CASE WHEN span_kind = 'SPAN_KIND_SERVER' THEN duration_ms END AS server_ms,
  0 AS inbound_calls,
  0.0 AS inbound_gap_ms,
  CASE WHEN parent_span_id IS NOT NULL AND parent_found_span_id IS NULL AND NOT self_parent THEN 1 ELSE 0 END
    AS orphans,
  CASE WHEN self_parent THEN 1 ELSE 0 END AS self_parents,
  trace_id
FROM span_parents
UNION ALL
SELECT service_name, t, 0, 0, 0, 0, 0, 0, CAST(NULL AS STRING), -covered_ms, CAST(NULL AS DOUBLE), 0, 0.0, 0, 0,
       trace_id
FROM child_coverage
UNION ALL
SELECT parent_service_name, parent_end_time, 0, 0, 0, 0, 0, 0, trace_id || '/' || parent_span_id, 0.0,
       CAST(NULL AS DOUBLE), 0, 0.0, 0, 0, trace_id
FROM span_parents
WHERE status_code = 'STATUS_CODE_ERROR' AND parent_found_span_id IS NOT NULL
  AND parent_status_code = 'STATUS_CODE_ERROR'
UNION ALL
SELECT callee, end_time, 0, 0, 0, 0, 0, 0, CAST(NULL AS STRING), 0.0, CAST(NULL AS DOUBLE), 1, gap_ms, 0, 0,
       trace_id
FROM edge_calls
WHERE gap_ms IS NOT NULL;
