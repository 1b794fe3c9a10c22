-- stormwatch_dead_letters: every input the jobs could not use, with the reason and where it came from
-- (topic, partition, offset), so nothing is lost and each can be found and replayed.
CREATE TEMPORARY TABLE stormwatch_dead_letters (
  `source_topic` STRING,
  `source_partition` INT,
  `source_offset` BIGINT,
  `reason` STRING,
  `payload` STRING,
  `job` STRING
) WITH (
  ${dead_letters_options},
  'format' = 'json'
);
