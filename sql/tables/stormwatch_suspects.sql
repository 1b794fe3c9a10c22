-- stormwatch_suspects: per window, every service ranked by how likely it is the root cause
-- (stormwatch/suspects.py). `flagged` where the score passes `threshold`; `evidence` (JSON) names
-- each signal, its value, its baseline and its surprise, and which anomalous callers a service
-- explains or which callee explains it. Keyed by service.
CREATE TEMPORARY TABLE stormwatch_suspects (
  `service` STRING,
  `window_start_ms` BIGINT,
  `window_end_ms` BIGINT,
  `rank` INT,
  `score` DOUBLE,
  `confidence` DOUBLE,
  `flagged` BOOLEAN,
  `threshold` DOUBLE,
  `evidence` STRING
) WITH (
  ${suspects_options},
  'key.format' = 'raw',
  'key.fields' = 'service',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
