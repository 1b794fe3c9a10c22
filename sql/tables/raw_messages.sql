-- ${raw_table}: the messages of a JSON topic as text, read only to find those that cannot be its JSON
-- at all (not JSON, not the expected object) and send them to the dead letters: the topic's typed
-- table skips them. One template for every JSON input topic (jobs/common.py raw_reader), each copy
-- with its own consumer group.
CREATE TEMPORARY TABLE ${raw_table} (
  `payload_bytes` BYTES,
  -- Decoded here, not by the raw format's charset: DECODE puts U+FFFD for bytes that are not UTF-8,
  -- where a STRING holding them makes SUBSTRING (the dead letter's payload) throw and fail the job.
  `payload` AS DECODE(`payload_bytes`, 'UTF-8'),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL
) WITH (
  ${raw_options},
  'format' = 'raw'
);
