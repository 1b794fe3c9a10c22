-- stormwatch_retry_decisions: every change of a retry gate: how often and how late callers may retry.
-- Written as canonical JSON by the decision jobs (sinks/decision_sink.sql); this typed table is how
-- the SQL client and the views read it. DECISION_ENVELOPE is the envelope every decision shares
-- (stormwatch/decisions.py); fields beyond these are in the JSON Schema (schemas/).
CREATE TEMPORARY TABLE stormwatch_retry_decisions (
  DECISION_ENVELOPE,
  `max_retries` INT,
  `base_delay_ms` DOUBLE,
  `exponential` BOOLEAN,
  `jitter` STRING,
  `max_delay_ms` DOUBLE,
  `budget_retries` BIGINT,
  `breaker_state` STRING,
  `reason_code` STRING
) WITH (
  ${retry_decisions_options},
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
