-- trace_input: the valid spans, in the columns and order the trace assembler reads
-- (io.stormwatch.flink.traces.SpanPath.SPAN_COLUMNS). `callee`: who a CLIENT span calls when nobody
-- traced answers it, as the semantic conventions name it: peer service, else database, else address.
CREATE TEMPORARY VIEW trace_input AS
SELECT
  trace_id, span_id, parent_span_id, service_name, service_instance_id, span_name, span_kind, status_code,
  COALESCE(peer_service, db_system, server_address, 'unknown') AS callee,
  links, start_time_unix_nano, end_time_unix_nano, kafka_partition, kafka_offset
FROM otlp_spans
WHERE reject_reason IS NULL;
