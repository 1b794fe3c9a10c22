-- instance_windows: per instance, and per service over all its instances (`instance` NULL), and health
-- window of the policy: calls and errors (from the metrics where an instance reports them, else from
-- its SERVER spans), span latency percentiles, the merged histogram, load, example traces.
-- Percentiles of metrics-only windows come from the histogram (stormwatch/health.py), not a sort.
CREATE TEMPORARY VIEW instance_windows AS
SELECT
  service_name AS service,
  instance,
  EXTRACT(EPOCH FROM window_start) * 1000 AS window_start_ms,
  EXTRACT(EPOCH FROM window_end) * 1000 AS window_end_ms,
  CASE WHEN SUM(metric_records) > 0 THEN 'metrics' ELSE 'spans' END AS source,
  CAST(CASE WHEN SUM(metric_records) > 0 THEN SUM(metric_requests) ELSE SUM(span_calls) END AS BIGINT) AS calls,
  CAST(CASE WHEN SUM(metric_records) > 0 THEN SUM(metric_errors) ELSE SUM(span_errors) END AS BIGINT) AS errors,
  CAST(SUM(span_calls) AS BIGINT) AS span_calls,
  CAST(SUM(metric_records) AS BIGINT) AS metric_records,
  -- Within 1 %: the span path's log-scale histograms, merged (HISTOGRAM_QUANTILE, sql/functions).
  HISTOGRAM_QUANTILE(MERGE_HISTOGRAMS(span_latency_histogram), 0.5) AS span_p50_ms,
  HISTOGRAM_QUANTILE(MERGE_HISTOGRAMS(span_latency_histogram), 0.95) AS span_p95_ms,
  HISTOGRAM_QUANTILE(MERGE_HISTOGRAMS(span_latency_histogram), 0.99) AS span_p99_ms,
  -- Quantiles reported by instances do not add up: the slowest is the conservative figure.
  MAX(metric_p50_ms) AS metric_p50_ms,
  MAX(metric_p95_ms) AS metric_p95_ms,
  MAX(metric_p99_ms) AS metric_p99_ms,
  -- DOUBLE, not the literals' DECIMAL: the decisions read these bounds in Python as numbers.
  CAST(ARRAY[${latency_bucket_bounds_ms}] AS ARRAY<DOUBLE>) AS latency_bucket_bounds_ms,
  SUM_ELEMENTS(latency_buckets, ${latency_bucket_count}) AS latency_buckets,
  AVG(load_ratio) AS load_ratio,
  MAX(in_flight) AS in_flight_max,
  AVG(capacity_rps) AS capacity_rps,
  CAST(COUNT(DISTINCT instance) AS BIGINT) AS instances,
  MIN(trace_id) AS example_trace_id,
  MIN(error_trace_id) AS example_error_trace_id
FROM TABLE(HOP(TABLE instance_facts, DESCRIPTOR(t), ${health_window_slide}, ${health_window_size}))
GROUP BY window_start, window_end, GROUPING SETS ((service_name, instance), (service_name));
