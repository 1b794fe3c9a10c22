-- otlp_instance_metrics: the OTLP metrics of one resource (service.name, service.instance.id) at one
-- timeUnixNano folded into one record of the columns views/instance_metrics_checked.sql takes from a
-- native stormwatch_instance_metrics record, so the rest of the health job sees one stream of records.
-- The request duration histogram's points (successes without error.type, one per error.type) add up to
-- requests, errors and the latency buckets; the gauges give in_flight, concurrency_limit, capacity_rps
-- and cpu_utilization. Quantiles are not in OTLP histograms: they come from the buckets downstream.
-- A resource and time with gauges and no request histogram is not a record (an instance that serves
-- nothing reports no requests). `format_reason` names what OTLP-specific makes the record unusable.
-- The fold is a 1 ms tumbling window on the message's event time: every point of a message shares it,
-- and the window's time is that same millisecond, so the record keeps the message's event time.
CREATE TEMPORARY VIEW otlp_instance_metrics AS
SELECT
  CAST('${otlp_metrics_topic}' AS STRING) AS source_topic,
  kafka_partition,
  kafka_offset,
  window_time AS t,
  MIN(start_time_unix_nano) AS start_time_unix_nano,
  time_unix_nano,
  service_name,
  service_instance_id,
  CAST(SUM(request_count) AS BIGINT) AS requests,
  CAST(SUM(CASE WHEN failed THEN request_count ELSE 0 END) AS BIGINT) AS errors,
  CASE WHEN COUNT(point_reason) = 0 THEN SUM_ELEMENTS(latency_buckets, ${latency_bucket_count}) END AS latency_buckets,
  CAST(NULL AS DOUBLE) AS latency_p50_ms,
  CAST(NULL AS DOUBLE) AS latency_p95_ms,
  CAST(NULL AS DOUBLE) AS latency_p99_ms,
  CAST(MAX(CASE WHEN metric_name = 'stormwatch.server.active_requests.max' THEN gauge_value END) AS BIGINT) AS in_flight,
  CAST(MAX(CASE WHEN metric_name = 'stormwatch.server.concurrency_limit' THEN gauge_value END) AS BIGINT)
    AS concurrency_limit,
  MAX(CASE WHEN metric_name = 'stormwatch.server.capacity' THEN gauge_value END) AS capacity_rps,
  MAX(CASE WHEN metric_name = 'process.cpu.utilization' THEN gauge_value END) AS cpu_utilization,
  CAST(CASE
    WHEN service_name IS NULL OR service_name = '' THEN 'resource has no service.name attribute'
    WHEN service_instance_id IS NULL OR service_instance_id = ''
      THEN 'resource has no service.instance.id attribute (nor k8s.pod.name, host.name)'
    ELSE MIN(point_reason)
  END AS STRING) AS format_reason
FROM TABLE(TUMBLE(TABLE otlp_metrics_points, DESCRIPTOR(t), INTERVAL '0.001' SECOND))
GROUP BY window_start, window_end, window_time, kafka_partition, kafka_offset, service_name, service_instance_id,
  time_unix_nano
HAVING COUNT(request_count) > 0;
