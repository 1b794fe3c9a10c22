-- Whole messages of an OTLP JSON topic that cannot be OTLP JSON at all never reach its flattened view:
-- found in the raw text (tables/raw_messages.sql as ${raw_table}) and sent to the dead letters. Rendered
-- once per OTLP topic: by flatten_spans for otlp_spans (resourceSpans), by health for otlp_metrics
-- (resourceMetrics).
INSERT INTO stormwatch_dead_letters
SELECT
  '${otlp_topic}', kafka_partition, kafka_offset,
  CASE
    WHEN payload IS NULL OR payload = '' THEN 'empty message'
    WHEN NOT (payload IS JSON OBJECT)
      THEN 'not a JSON object (is the exporter writing otlp_proto to a topic read as otlp_json?)'
    ELSE 'no ${otlp_array} array: not an OTLP ${otlp_request}'
  END,
  SUBSTRING(payload FROM 1 FOR ${dead_letter_payload_max_chars}),
  '${job}'
FROM ${raw_table}
WHERE payload IS NULL
   OR NOT (payload IS JSON OBJECT)
   OR NOT COALESCE(JSON_QUERY(payload, '$.${otlp_array}') IS JSON ARRAY, FALSE);
