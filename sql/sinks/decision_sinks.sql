-- The decision topics as the decision jobs write them: key = the entity ("service:NAME", ...), value =
-- the decision exactly as stormwatch/decisions.py encodes it (canonical JSON), so replaying the same
-- input gives byte-identical records. The typed tables users query are tables/stormwatch_<topic>.sql.
CREATE TEMPORARY TABLE health_records_out (`entity_key` STRING, `record` STRING) WITH (
  ${health_options},
  'key.format' = 'raw', 'key.fields' = 'entity_key',
  'value.format' = 'raw', 'value.fields-include' = 'EXCEPT_KEY'
);

CREATE TEMPORARY TABLE breaker_decisions_out (`entity_key` STRING, `record` STRING) WITH (
  ${breaker_decisions_options},
  'key.format' = 'raw', 'key.fields' = 'entity_key',
  'value.format' = 'raw', 'value.fields-include' = 'EXCEPT_KEY'
);

CREATE TEMPORARY TABLE retry_decisions_out (`entity_key` STRING, `record` STRING) WITH (
  ${retry_decisions_options},
  'key.format' = 'raw', 'key.fields' = 'entity_key',
  'value.format' = 'raw', 'value.fields-include' = 'EXCEPT_KEY'
);

CREATE TEMPORARY TABLE pareto_fronts_out (`entity_key` STRING, `record` STRING) WITH (
  ${pareto_fronts_options},
  'key.format' = 'raw', 'key.fields' = 'entity_key',
  'value.format' = 'raw', 'value.fields-include' = 'EXCEPT_KEY'
);

CREATE TEMPORARY TABLE scaling_decisions_out (`entity_key` STRING, `record` STRING) WITH (
  ${scaling_decisions_options},
  'key.format' = 'raw', 'key.fields' = 'entity_key',
  'value.format' = 'raw', 'value.fields-include' = 'EXCEPT_KEY'
);
