-- stormwatch_edge_events: EDGE_APPEARED when a caller -> callee pair is first seen, EDGE_VANISHED
-- when it has had no call for [pipeline.suspects] vanish_after_windows windows. Keyed by the edge.
CREATE TEMPORARY TABLE stormwatch_edge_events (
  `caller` STRING,
  `callee` STRING,
  `event` STRING,
  `window_start_ms` BIGINT,
  `window_end_ms` BIGINT,
  `first_seen_ms` BIGINT,
  `last_seen_ms` BIGINT
) WITH (
  ${edge_events_options},
  'key.format' = 'json',
  'key.fields' = 'caller;callee',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
