-- A decision topic as the decision jobs write it, rendered once per topic (jobs/decision_stream.py):
-- key = the entity ("service:NAME", ...), value = the decision exactly as stormwatch/decisions.py
-- encodes it (canonical JSON), so replaying the same input gives byte-identical records. The typed
-- tables users query are tables/stormwatch_<topic>.sql.
CREATE TEMPORARY TABLE ${sink_table} (`entity_key` STRING, `record` STRING) WITH (
  ${sink_options},
  'key.format' = 'raw', 'key.fields' = 'entity_key',
  'value.format' = 'raw', 'value.fields-include' = 'EXCEPT_KEY'
);
