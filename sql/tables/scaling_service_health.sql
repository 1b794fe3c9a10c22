-- scaling_service_health: stormwatch_health as the scaling job reads it, in event time: the second
-- input of its per-service operator (jobs/scaling.py). The health job publishes a health record for
-- every service every window, naming the service's breaker as of that window's end (`breaker`, the
-- newest breaker decision, this window's included: stormwatch/entity_control.py). So a service's
-- record of a window says its breaker's decisions up to that window are known: the scaling job decides
-- a window only once it has it, however quiet stormwatch_breaker_decisions is (a breaker decides only
-- when it changes). Only the fields coordination needs; the typed table users query is
-- tables/stormwatch_health.sql.
CREATE TEMPORARY TABLE scaling_service_health (
  `entity` ROW<`kind` STRING, `key` STRING, `service` STRING>,
  `window_end_ms` BIGINT,
  `breaker` ROW<`decision_id` STRING, `state` STRING, `window_end_ms` BIGINT, `enforced` BOOLEAN>,
  `window_end_time` AS TO_TIMESTAMP_LTZ(COALESCE(`window_end_ms`, 0), 3),
  WATERMARK FOR `window_end_time` AS `window_end_time` - ${watermark_out_of_orderness}
) WITH (
  ${health_options},
  -- Every entity every window: a partition is quiet only when it holds no entity, or the health job is
  -- down. [pipeline.scaling] health_idle_timeout_seconds: how long it holds the scaling windows back then.
  'scan.watermark.idle-timeout' = '${health_idle_timeout}',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
