-- instance_metrics_checked: every metrics record of both sources, stormwatch_instance_metrics (native)
-- and otlp_metrics (views/otlp_instance_metrics.sql, folded into the same columns), with the topic it
-- came from, `reject_reason` NULL for a usable record and naming the problem otherwise (the health job
-- routes rejected records to the dead letters), the load ratio of each record (the busiest of
-- concurrency, request rate against capacity, and CPU) and its histogram at the project's bucket bounds.
CREATE TEMPORARY VIEW instance_metrics_checked AS
SELECT
  *,
  CASE
    WHEN in_flight IS NULL AND capacity_rps IS NULL AND cpu_utilization IS NULL THEN CAST(NULL AS DOUBLE)
    ELSE GREATEST(
      COALESCE(CAST(in_flight AS DOUBLE) / NULLIF(concurrency_limit, 0), 0.0),
      COALESCE(requests / (NULLIF(time_unix_nano - start_time_unix_nano, 0) / 1e9) / NULLIF(capacity_rps, 0), 0.0),
      COALESCE(cpu_utilization, 0.0))
  END AS load_ratio,
  CASE
    WHEN format_reason IS NOT NULL THEN format_reason
    WHEN service_name IS NULL OR service_name = '' THEN 'service_name missing or not a string'
    WHEN service_instance_id IS NULL OR service_instance_id = '' THEN 'service_instance_id missing or not a string'
    WHEN time_unix_nano IS NULL OR time_unix_nano <= 0 THEN 'time_unix_nano missing or not a positive integer'
    WHEN start_time_unix_nano IS NOT NULL AND start_time_unix_nano > time_unix_nano
      THEN 'start_time_unix_nano is after time_unix_nano'
    WHEN requests IS NULL OR requests < 0 THEN 'requests missing or negative'
    WHEN errors IS NULL OR errors < 0 OR errors > requests THEN 'errors missing, negative or above requests'
    WHEN latency_buckets IS NULL AND latency_p95_ms IS NULL AND requests > 0
      THEN 'no latency: neither latency_bucket_counts nor latency_p95_ms'
    WHEN t < CURRENT_WATERMARK(t) THEN 'late metrics record: behind the watermark, its windows are closed'
  END AS reject_reason
FROM (
  SELECT
    CAST('${metrics_topic}' AS STRING) AS source_topic, kafka_partition, kafka_offset, t,
    start_time_unix_nano, time_unix_nano, service_name, service_instance_id, requests, errors, latency_buckets,
    latency_p50_ms, latency_p95_ms, latency_p99_ms, in_flight, concurrency_limit, capacity_rps, cpu_utilization,
    CAST(CASE WHEN latency_bucket_counts IS NOT NULL AND latency_buckets IS NULL
      THEN 'latency histogram malformed: bounds must ascend and counts have one entry more than bounds' END AS STRING)
      AS format_reason
  FROM (
    SELECT *, CASE WHEN CARDINALITY(cumulative) > 0 THEN cumulative END AS latency_buckets
    FROM (
      SELECT *, cumulative_buckets(latency_bucket_bounds_ms, latency_bucket_counts, ARRAY[${latency_bucket_bounds_ms}])
        AS cumulative
      FROM stormwatch_instance_metrics
    )
  )
  UNION ALL
  SELECT * FROM otlp_instance_metrics
);
