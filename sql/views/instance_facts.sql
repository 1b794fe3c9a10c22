-- instance_facts: what the RED figures of an instance add up, one fact a row on one event-time column
-- `t`, from both sources: every SERVER span (one call, its error, its latency) and every usable metrics
-- record (its requests, errors, quantiles and load). Each row carries cumulative bucket counts at the
-- project's bounds, so one windowed aggregate merges spans and metrics into one histogram.
CREATE TEMPORARY VIEW instance_facts AS
SELECT
  service_name,
  COALESCE(service_instance_id, 'unknown') AS instance,
  end_time AS t,
  1 AS span_calls,
  CASE WHEN status_code = 'STATUS_CODE_ERROR' THEN 1 ELSE 0 END AS span_errors,
  duration_ms AS span_latency_ms,
  0 AS metric_records,
  CAST(0 AS BIGINT) AS metric_requests,
  CAST(0 AS BIGINT) AS metric_errors,
  CAST(NULL AS DOUBLE) AS metric_p50_ms,
  CAST(NULL AS DOUBLE) AS metric_p95_ms,
  CAST(NULL AS DOUBLE) AS metric_p99_ms,
  CAST(NULL AS DOUBLE) AS load_ratio,
  CAST(NULL AS BIGINT) AS in_flight,
  CAST(NULL AS DOUBLE) AS capacity_rps,
  CUMULATIVE_INDICATORS(duration_ms, ${latency_bucket_bounds_ms}) AS latency_buckets,
  trace_id,
  CASE WHEN status_code = 'STATUS_CODE_ERROR' THEN trace_id END AS error_trace_id
FROM unique_spans
WHERE span_kind = 'SPAN_KIND_SERVER'
UNION ALL
SELECT
  service_name, service_instance_id, t,
  0, 0, CAST(NULL AS DOUBLE),
  1, requests, errors, latency_p50_ms, latency_p95_ms, latency_p99_ms,
  load_ratio, in_flight, capacity_rps,
  latency_buckets,
  CAST(NULL AS STRING), CAST(NULL AS STRING)
FROM instance_metrics_checked
WHERE reject_reason IS NULL;
