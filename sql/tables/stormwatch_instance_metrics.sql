-- stormwatch_instance_metrics: per-instance request metrics, one record per instance and reporting
-- interval, as schemas/stormwatch_instance_metrics.schema.json describes (OTLP-style names: times in
-- unix nanoseconds, explicit-bucket histograms with per-bucket counts, len(counts) = len(bounds) + 1).
-- A field of the wrong type becomes NULL (json.ignore-parse-errors); views/instance_metrics_checked.sql
-- then names what is wrong and the health job sends the record to the dead letters.
CREATE TEMPORARY TABLE stormwatch_instance_metrics (
  `start_time_unix_nano` BIGINT,
  `time_unix_nano` BIGINT,
  `service_name` STRING,
  `service_instance_id` STRING,
  `requests` BIGINT,
  `errors` BIGINT,
  `latency_bucket_bounds_ms` ARRAY<DOUBLE>,
  `latency_bucket_counts` ARRAY<BIGINT>,
  `latency_p50_ms` DOUBLE,
  `latency_p95_ms` DOUBLE,
  `latency_p99_ms` DOUBLE,
  `in_flight` BIGINT,
  `concurrency_limit` BIGINT,
  `capacity_rps` DOUBLE,
  `cpu_utilization` DOUBLE,
  -- A record without a time gets epoch 0: it is then late, never a NULL event time that fails the job.
  `t` AS TO_TIMESTAMP_LTZ(COALESCE(`time_unix_nano`, 0) / 1000000, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `t` AS `t` - ${watermark_out_of_orderness}
) WITH (
  ${metrics_options},
  'scan.watermark.idle-timeout' = '${idle_timeout}',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
