-- stormwatch_span_instances: per instance and slide bucket of the span path ([pipeline.topology]
-- window_slide_seconds), what its SERVER spans add up to: calls, errors, a sparse log-scale latency
-- histogram (MERGE_HISTOGRAMS / HISTOGRAM_QUANTILE) and calls at or under each latency bound
-- (cumulative). Written by the span path (jobs/spans.py) from the same pass over each trace as every
-- other output, one record per instance, bucket and span-path subtask (the subtask's share: counts add,
-- histograms merge), then after each bucket the subtask's progress marks: records with `service` and
-- `instance` NULL and bucket_start_ms = bucket_end_ms = T, "this writer has written everything before
-- T". Each subtask writes into partitions of its own (WriterPartitioner): one writer per partition.
-- The health job merges the figures with the instances' metrics into its windows (any window that is a
-- whole number of buckets). Keyed by service and instance.
CREATE TEMPORARY TABLE stormwatch_span_instances (
  `service` STRING,
  `instance` STRING,
  `bucket_start_ms` BIGINT,
  `bucket_end_ms` BIGINT,
  `calls` BIGINT,
  `errors` BIGINT,
  `latency_histogram` ARRAY<BIGINT>,
  `latency_buckets` ARRAY<BIGINT>,
  `example_trace_id` STRING,
  `example_error_trace_id` STRING,
  -- Read back by the health job: figures at their bucket's last millisecond, a mark at its T. A
  -- partition has one writer, which writes a bucket's figures before the mark that closes it, so the
  -- watermark can follow the marks with no allowance: a window closes as soon as its last bucket's mark
  -- is on every partition.
  `bucket_time` AS TO_TIMESTAMP_LTZ(IF(`service` IS NULL, `bucket_end_ms`, `bucket_end_ms` - 1), 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `bucket_time` AS `bucket_time` - INTERVAL '0.001' SECOND
) WITH (
  ${span_instances_options},
  -- [pipeline.health] span_figures_idle_timeout_seconds: longer than an outage, so none loses a bucket.
  'scan.watermark.idle-timeout' = '${span_figures_idle_timeout}',
  -- The span path's sink: each subtask into partitions of its own.
  'sink.partitioner' = 'io.stormwatch.flink.traces.WriterPartitioner',
  'key.format' = 'json',
  'key.fields' = 'service;instance',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
