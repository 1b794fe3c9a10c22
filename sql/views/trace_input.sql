-- trace_input: every span the decoder read, valid or not, in the columns and order the trace assembler
-- reads (io.stormwatch.flink.traces.SpanPath.SPAN_COLUMNS): one read of the topic serves both. A span
-- with a reject_reason goes to the dead letters with dead_letter_payload. `callee`: who a CLIENT span
-- calls when nobody traced answers it, as the semantic conventions name it: peer service, else
-- database, else address.
CREATE TEMPORARY VIEW trace_input AS
SELECT
  trace_id, span_id, parent_span_id, service_name, service_instance_id, span_name, span_kind, status_code,
  COALESCE(peer_service, db_system, server_address, 'unknown') AS callee,
  links, start_time_unix_nano, end_time_unix_nano, kafka_partition, kafka_offset, reject_reason,
  dead_letter_payload
FROM otlp_spans;
