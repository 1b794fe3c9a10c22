-- stormwatch_span_instances: per instance and slide bucket of the span path ([pipeline.topology]
-- window_slide_seconds), what its SERVER spans add up to: calls, errors, a sparse log-scale latency
-- histogram (MERGE_HISTOGRAMS / HISTOGRAM_QUANTILE) and calls at or under each latency bound
-- (cumulative). Written by the span path (jobs/spans.py) from the same pass over each trace as every
-- other output; the health job merges it with the instances' metrics into its windows. Buckets merge
-- into any window that is a whole number of them. Keyed by service and instance.
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
  -- Read back by the health job: a bucket's event time is its start. The span path's subtasks close a
  -- bucket at nearly the same moment, not at once: one of them may write the next bucket before another
  -- has written this one, so the watermark trails by one bucket (a slide), never dropping a record.
  `bucket_time` AS TO_TIMESTAMP_LTZ(`bucket_start_ms`, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `bucket_time` AS `bucket_time` - ${window_slide}
) WITH (
  ${span_instances_options},
  -- [pipeline.health] span_figures_idle_timeout_seconds: longer than an outage, so none loses a bucket.
  'scan.watermark.idle-timeout' = '${span_figures_idle_timeout}',
  'key.format' = 'json',
  'key.fields' = 'service;instance',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
