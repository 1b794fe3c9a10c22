-- stormwatch_pareto_fronts: per service and window, the QPS-latency Pareto front of its instances.
-- Written as canonical JSON by the decision jobs (sinks/decision_sink.sql); this typed table is how
-- the SQL client and the views read it. DECISION_ENVELOPE is the envelope every decision shares
-- (stormwatch/decisions.py); fields beyond these are in the JSON Schema (schemas/).
CREATE TEMPORARY TABLE stormwatch_pareto_fronts (
  DECISION_ENVELOPE,
  `service` STRING,
  `latency_quantile` STRING,
  `front` ARRAY<ROW<`instance` STRING, `qps` DOUBLE, `latency_ms` DOUBLE, `calls` BIGINT>>
) WITH (
  ${pareto_fronts_options},
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
