-- stormwatch_policy: the compacted policy topic. Key = the policy's name, value = the whole policy
-- document (config/policy.toml as JSON). The decision jobs read it from the beginning as broadcast
-- state; stormwatch/policy.py validates each record and keeps the previous policy if it is invalid.
CREATE TEMPORARY TABLE stormwatch_policy (
  `name` STRING,
  `document` STRING,
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL
) WITH (
  ${policy_options},
  'key.format' = 'raw',
  'key.fields' = 'name',
  'value.format' = 'raw',
  'value.fields-include' = 'EXCEPT_KEY'
);
