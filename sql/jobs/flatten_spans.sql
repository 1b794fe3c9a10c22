-- Job flatten_spans: otlp_spans -> stormwatch_spans, and everything unusable -> stormwatch_dead_letters.
-- Needs tables/otlp_spans_{json,proto}.sql, tables/stormwatch_spans.sql, tables/stormwatch_dead_letters.sql,
-- views/otlp_span_rows_{json,proto}.sql and views/otlp_spans_flat.sql; whole messages that do not
-- decode: jobs/not_otlp_json.sql or jobs/not_otlp_proto.sql.

INSERT INTO stormwatch_spans
SELECT
  trace_id, span_id, parent_span_id, service_name, service_instance_id, span_name, span_kind,
  status_code, status_message, peer_service, db_system, server_address, links,
  start_time_unix_nano, end_time_unix_nano, duration_ms
FROM otlp_spans_flat
WHERE reject_reason IS NULL;

INSERT INTO stormwatch_dead_letters
SELECT
  '${source_topic}', kafka_partition, kafka_offset, reject_reason,
  JSON_OBJECT(
    'traceId' VALUE trace_id, 'spanId' VALUE span_id, 'parentSpanId' VALUE parent_span_id,
    'serviceName' VALUE service_name, 'name' VALUE span_name,
    'startTimeUnixNano' VALUE start_time_unix_nano, 'endTimeUnixNano' VALUE end_time_unix_nano
  ),
  'flatten_spans'
FROM otlp_spans_flat
WHERE reject_reason IS NOT NULL;
