-- stormwatch_service_windows: per service and window, the figures the root-cause ranking reads
-- (stormwatch/suspects.py ServiceWindow) and the error propagation classes:
--   errors = error_origins (no child of the span failed) + the rest; independently of that,
--   errors_propagated (the parent failed too), errors_absorbed (the parent did not: the chain
--   stopped there), errors_surfaced (a root: the error reached the user).
-- self_ms_total: the service's exclusive time (spans' durations minus what their children cover).
-- inbound_gap_ms_total: over CLIENT -> SERVER calls into the service, client minus server time.
-- orphans: spans whose parent never arrived (broken traces); self_parents: spans naming themselves.
CREATE TEMPORARY TABLE stormwatch_service_windows (
  `service` STRING,
  `window_start_ms` BIGINT,
  `window_end_ms` BIGINT,
  `spans` BIGINT,
  `server_spans` BIGINT,
  `errors` BIGINT,
  `error_origins` BIGINT,
  `errors_propagated` BIGINT,
  `errors_absorbed` BIGINT,
  `errors_surfaced` BIGINT,
  `server_p50_ms` DOUBLE,
  `server_p95_ms` DOUBLE,
  `self_ms_total` DOUBLE,
  `inbound_calls` BIGINT,
  `inbound_gap_ms_total` DOUBLE,
  `orphans` BIGINT,
  `self_parents` BIGINT,
  `example_trace_id` STRING,
  -- Read back by the suspects job: a window's records are complete once the watermark passes its end.
  `window_end_time` AS TO_TIMESTAMP_LTZ(`window_end_ms`, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `window_end_time` AS `window_end_time` - ${watermark_out_of_orderness}
) WITH (
  ${service_windows_options},
  'key.format' = 'raw',
  'key.fields' = 'service',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
