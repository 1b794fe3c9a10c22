-- unique_spans: stormwatch_spans with each (trace id, span id) once, the first copy that arrived,
-- and without late spans (behind the watermark: windows and joins would drop them silently;
-- sql/jobs/topology.sql sends them to the dead letters instead).
-- Exporters retry, so the same span can come twice (the TrainTicket data has such copies); a copy
-- would count twice and pair twice with its parent. Deduplicating on arrival order keeps the
-- stream append-only, so the event-time joins and windows downstream can consume it.
CREATE TEMPORARY VIEW unique_spans AS
SELECT
  trace_id, span_id, parent_span_id, service_name, service_instance_id, span_name, span_kind,
  status_code, status_message, peer_service, db_system, server_address, links,
  start_time_unix_nano, end_time_unix_nano, duration_ms, end_time
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY trace_id, span_id ORDER BY arrival_time ASC) AS row_num
  FROM stormwatch_spans
  WHERE CURRENT_WATERMARK(end_time) IS NULL OR end_time >= CURRENT_WATERMARK(end_time)
)
WHERE row_num = 1;
