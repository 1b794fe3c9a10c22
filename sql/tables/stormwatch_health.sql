-- stormwatch_health: the health of every service, instance and edge, every window: a score or INSUFFICIENT_DATA.
-- Written as canonical JSON by the decision jobs (sinks/decision_sink.sql); this typed table is how
-- the SQL client and the views read it. DECISION_ENVELOPE is the envelope every decision shares
-- (stormwatch/decisions.py); fields beyond these are in the JSON Schema (schemas/).
CREATE TEMPORARY TABLE stormwatch_health (
  DECISION_ENVELOPE,
  `status` STRING,
  `score` DOUBLE,
  `error_rate` DOUBLE
) WITH (
  ${health_options},
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
