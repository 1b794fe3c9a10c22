-- stormwatch_breaker_decisions: every change of a circuit breaker (per service and per caller -> callee edge).
-- Written as canonical JSON by the decision jobs (sinks/decision_sink.sql); this typed table is how
-- the SQL client and the views read it. DECISION_ENVELOPE is the envelope every decision shares
-- (stormwatch/decisions.py); fields beyond these are in the JSON Schema (schemas/).
CREATE TEMPORARY TABLE stormwatch_breaker_decisions (
  DECISION_ENVELOPE,
  `state` STRING,
  `previous_state` STRING,
  `admitted_share` DOUBLE,
  `max_probes` INT,
  `reason_code` STRING,
  `enforced` BOOLEAN
) WITH (
  ${breaker_decisions_options},
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
