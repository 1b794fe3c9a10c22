-- stormwatch_instance_windows: views/instance_windows.sql as the health job publishes it, per instance
-- and per service (`instance` NULL) and health window. The scaling job reads the instance rows.
-- latency_buckets counts calls at or under each bound of latency_bucket_bounds_ms (cumulative).
CREATE TEMPORARY TABLE stormwatch_instance_windows (
  `service` STRING,
  `instance` STRING,
  `window_start_ms` BIGINT,
  `window_end_ms` BIGINT,
  `source` STRING,
  `calls` BIGINT,
  `errors` BIGINT,
  `span_calls` BIGINT,
  `metric_records` BIGINT,
  `span_p50_ms` DOUBLE,
  `span_p95_ms` DOUBLE,
  `span_p99_ms` DOUBLE,
  `metric_p50_ms` DOUBLE,
  `metric_p95_ms` DOUBLE,
  `metric_p99_ms` DOUBLE,
  `latency_bucket_bounds_ms` ARRAY<DOUBLE>,
  `latency_buckets` ARRAY<BIGINT>,
  `load_ratio` DOUBLE,
  `in_flight_max` BIGINT,
  `capacity_rps` DOUBLE,
  `instances` BIGINT,
  `example_trace_id` STRING,
  `example_error_trace_id` STRING,
  -- Read back by the scaling job: a window's records are complete once the watermark passes its end.
  `window_end_time` AS TO_TIMESTAMP_LTZ(`window_end_ms`, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `window_end_time` AS `window_end_time` - ${watermark_out_of_orderness}
) WITH (
  ${instance_windows_options},
  'key.format' = 'json',
  'key.fields' = 'service;instance',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
