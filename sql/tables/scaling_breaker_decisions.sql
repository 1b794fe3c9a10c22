-- scaling_breaker_decisions: stormwatch_breaker_decisions as the scaling job reads it, in event time:
-- the second input of its per-service operator (jobs/scaling.py), which takes each service's breaker
-- as of a scaling window's end (stormwatch/coordination.py). Only the fields coordination needs; the
-- typed table users query is tables/stormwatch_breaker_decisions.sql (no watermark there: its views join).
-- Breakers decide on the health job's windows, as the instance windows do: the same watermark.
CREATE TEMPORARY TABLE scaling_breaker_decisions (
  `decision_id` STRING,
  `entity` ROW<`kind` STRING, `key` STRING, `service` STRING>,
  `window_end_ms` BIGINT,
  `state` STRING,
  `enforced` BOOLEAN,
  `window_end_time` AS TO_TIMESTAMP_LTZ(COALESCE(`window_end_ms`, 0), 3),
  WATERMARK FOR `window_end_time` AS `window_end_time` - ${watermark_out_of_orderness}
) WITH (
  ${breaker_decisions_options},
  -- A breaker decides only when it changes: its topic is quiet for hours. [pipeline.scaling]
  -- breaker_idle_timeout_seconds: how long a quiet partition holds the scaling windows back.
  'scan.watermark.idle-timeout' = '${breaker_idle_timeout}',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
