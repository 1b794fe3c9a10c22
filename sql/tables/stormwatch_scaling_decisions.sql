-- stormwatch_scaling_decisions: every change of a service's scaling recommendation.
-- Written as canonical JSON by the decision jobs (sinks/decision_sink.sql); this typed table is how
-- the SQL client and the views read it. DECISION_ENVELOPE is the envelope every decision shares
-- (stormwatch/decisions.py); fields beyond these are in the JSON Schema (schemas/).
CREATE TEMPORARY TABLE stormwatch_scaling_decisions (
  DECISION_ENVELOPE,
  `service` STRING,
  `current_replicas` INT,
  `desired_replicas` INT,
  `action` STRING,
  `reason_code` STRING
) WITH (
  ${scaling_decisions_options},
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
