-- instance_facts: what the RED figures of an instance add up, one fact a row on one event-time column
-- `t`, from both sources: its SERVER spans per slide bucket of the span path (stormwatch_span_instances:
-- calls, errors, a latency histogram, at the bucket's last millisecond) and every usable metrics record
-- (its requests, errors, quantiles and load). Each row carries cumulative bucket counts at the project's
-- bounds, so one windowed aggregate merges spans and metrics into one histogram.
CREATE TEMPORARY VIEW instance_facts AS
SELECT
  service AS service_name,
  instance,
  bucket_time AS t,
  calls AS span_calls,
  errors AS span_errors,
  latency_histogram AS span_latency_histogram,
  0 AS metric_records,
  CAST(0 AS BIGINT) AS metric_requests,
  CAST(0 AS BIGINT) AS metric_errors,
  CAST(NULL AS DOUBLE) AS metric_p50_ms,
  CAST(NULL AS DOUBLE) AS metric_p95_ms,
  CAST(NULL AS DOUBLE) AS metric_p99_ms,
  CAST(NULL AS DOUBLE) AS load_ratio,
  CAST(NULL AS BIGINT) AS in_flight,
  CAST(NULL AS DOUBLE) AS capacity_rps,
  latency_buckets,
  example_trace_id AS trace_id,
  example_error_trace_id AS error_trace_id
FROM stormwatch_span_instances
WHERE `service` IS NOT NULL -- progress marks move the watermark only
UNION ALL
SELECT
  service_name, service_instance_id, t,
  CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(NULL AS ARRAY<BIGINT>),
  1, requests, errors, latency_p50_ms, latency_p95_ms, latency_p99_ms,
  load_ratio, in_flight, capacity_rps,
  latency_buckets,
  CAST(NULL AS STRING), CAST(NULL AS STRING)
FROM instance_metrics_checked
WHERE reject_reason IS NULL;
