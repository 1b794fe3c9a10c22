-- Whole messages of an otlp_proto topic that do not decode as ${otlp_request} never reach its
-- flattened view (tables/otlp_spans_proto.sql skips them): found in the raw bytes (tables/raw_messages.sql
-- as ${raw_table}) by PROTOBUF_ERROR (sql/functions) and sent to the dead letters, the payload in base64.
INSERT INTO stormwatch_dead_letters
SELECT '${otlp_topic}', kafka_partition, kafka_offset, reason,
       SUBSTRING(TO_BASE64(payload_bytes) FROM 1 FOR ${dead_letter_payload_max_chars}), '${job}'
FROM (
  SELECT kafka_partition, kafka_offset, payload_bytes,
         PROTOBUF_ERROR(payload_bytes, 'io.opentelemetry.proto.collector.trace.v1.${otlp_request}') AS reason
  FROM ${raw_table}
)
WHERE reason IS NOT NULL;
