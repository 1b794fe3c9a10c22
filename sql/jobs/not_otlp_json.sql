-- Whole messages of an OTLP JSON topic that are not OTLP JSON, or break its shape where the topic's
-- table reads objects and arrays, never reach (all of) its flattened view: found in the raw text
-- (tables/raw_messages.sql as ${raw_table}) by OTLP_JSON_ERROR (sql/functions) and sent to the dead
-- letters with the reason. Rendered once per OTLP topic: by flatten_spans for otlp_spans
-- (resourceSpans), by health for otlp_metrics (resourceMetrics).
INSERT INTO stormwatch_dead_letters
SELECT '${otlp_topic}', kafka_partition, kafka_offset, reason,
       SUBSTRING(payload FROM 1 FOR ${dead_letter_payload_max_chars}), '${job}'
FROM (
  SELECT kafka_partition, kafka_offset, payload, OTLP_JSON_ERROR(payload, '${otlp_array}', '${otlp_request}') AS reason
  FROM ${raw_table}
)
WHERE reason IS NOT NULL;
