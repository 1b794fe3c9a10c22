-- The same stormwatch_instance_metrics messages as text, read only to find those that are not a JSON
-- object at all (the typed table skips them) and send them to the dead letters.
CREATE TEMPORARY TABLE stormwatch_instance_metrics_raw (
  `payload` STRING,
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL
) WITH (
  ${metrics_raw_options},
  'format' = 'raw',
  'raw.charset' = 'UTF-8'
);
