-- stormwatch_topology_snapshots: per window, the service graph: services, entry points, the
-- longest call chain, and every edge with its calls, errors, p95 and when it was first seen
-- (`edges`, JSON). Keyed by window end, one record a window.
CREATE TEMPORARY TABLE stormwatch_topology_snapshots (
  `window_end_ms` BIGINT,
  `window_start_ms` BIGINT,
  `services` ARRAY<STRING>,
  `entry_points` ARRAY<STRING>,
  `depth` INT,
  `edges` STRING
) WITH (
  ${topology_snapshots_options},
  'key.format' = 'json',
  'key.fields' = 'window_end_ms',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
