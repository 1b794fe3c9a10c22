-- Job flatten_spans: otlp_spans -> stormwatch_spans, and everything unusable -> stormwatch_dead_letters.
-- Needs tables/otlp_spans.sql (each message decoded once, one row per span, rejected ones with their
-- reason and payload), tables/stormwatch_spans.sql and tables/stormwatch_dead_letters.sql.

INSERT INTO stormwatch_spans
SELECT
  trace_id, span_id, parent_span_id, service_name, service_instance_id, span_name, span_kind,
  status_code, status_message, peer_service, db_system, server_address, links,
  start_time_unix_nano, end_time_unix_nano, duration_ms
FROM otlp_spans
WHERE reject_reason IS NULL;

INSERT INTO stormwatch_dead_letters
SELECT '${source_topic}', kafka_partition, kafka_offset, reject_reason, dead_letter_payload, 'flatten_spans'
FROM otlp_spans
WHERE reject_reason IS NOT NULL;
