-- The same otlp_spans messages as bytes decoded to text, read only to find those that cannot be
-- OTLP JSON at all (not JSON, no resourceSpans array) and send them to the dead letters.
CREATE TEMPORARY TABLE otlp_spans_raw (
  `payload` STRING,
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL
) WITH (
  ${source_options},
  'format' = 'raw',
  'raw.charset' = 'UTF-8'
);
