-- untraced_calls: CLIENT spans no child span ever answered: calls into something that is not traced
-- (a database, an LLM API, a queue). The callee is named by the span's own attributes, as the
-- OpenTelemetry semantic conventions put it: peer service, else database system, else server address.
CREATE TEMPORARY VIEW untraced_calls AS
SELECT
  cl.trace_id,
  cl.span_id,
  cl.service_name,
  COALESCE(cl.peer_service, cl.db_system, cl.server_address, 'unknown') AS callee,
  cl.status_code,
  cl.duration_ms,
  cl.end_time
FROM (SELECT * FROM unique_spans WHERE span_kind = 'SPAN_KIND_CLIENT') AS cl
LEFT JOIN unique_spans AS ch
  ON ch.trace_id = cl.trace_id
 AND ch.parent_span_id = cl.span_id
 AND ch.span_id <> cl.span_id
 AND ch.end_time BETWEEN cl.end_time - ${max_span_duration}
                     AND cl.end_time + ${clock_skew}
WHERE ch.span_id IS NULL;
