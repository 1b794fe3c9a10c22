-- The otlp_metrics messages flattened on the JVM with CROSS JOIN UNNEST (resourceMetrics -> scopeMetrics
-- -> metrics -> data points), to be folded into one record per instance and time by
-- views/otlp_instance_metrics.sql. Read are the metrics stormwatch/traffic/metrics.py describes: the
-- request duration histograms of the HTTP and RPC semantic conventions, and four gauges; other metrics
-- on the topic are not the health job's and are passed over.

-- otlp_metrics_arrived: every message, `late` when it is behind the watermark (the windows its records
-- belong to are closed) or has no event time at all: the health job sends it to the dead letters, the
-- fold never sees it.
CREATE TEMPORARY VIEW otlp_metrics_arrived AS
SELECT *, t = TO_TIMESTAMP_LTZ(0, 3) OR COALESCE(t <= CURRENT_WATERMARK(t), FALSE) AS late
FROM otlp_metrics;

-- otlp_metrics_flat: one row per metric read, with its resource's service and instance.
CREATE TEMPORARY VIEW otlp_metrics_flat AS
SELECT
  m.`kafka_partition`,
  m.`kafka_offset`,
  m.`t`,
  m.`late`,
  ATTRIBUTE_STRING(rm.`resource`.`attributes`, 'service.name') AS service_name,
  INSTANCE_ID(rm.`resource`.`attributes`) AS service_instance_id,
  mt.`name` AS metric_name,
  mt.`unit` AS unit,
  mt.`histogram` AS histogram,
  mt.`gauge` AS gauge
FROM otlp_metrics_arrived AS m
CROSS JOIN UNNEST(m.`resourceMetrics`) AS rm(`resource`, `scopeMetrics`)
CROSS JOIN UNNEST(rm.`scopeMetrics`) AS sm(`metrics`)
CROSS JOIN UNNEST(sm.`metrics`) AS mt(`name`, `unit`, `histogram`, `gauge`, `sum`, `summary`, `exponentialHistogram`)
WHERE mt.`name` IN ('http.server.request.duration', 'rpc.server.call.duration',
                    'stormwatch.server.active_requests.max', 'stormwatch.server.concurrency_limit',
                    'stormwatch.server.capacity', 'process.cpu.utilization');

-- otlp_metrics_points: one row per data point of the messages in time, histogram points and gauge
-- points in one shape (a window table function takes a named view). A histogram point's buckets are
-- read at the project's bounds in seconds, OTLP's unit (cumulative_buckets, udfs/histograms.py: an
-- empty array when malformed), so points of any bounds add up; `point_reason` says what makes a point unusable.
CREATE TEMPORARY VIEW otlp_metrics_points AS
SELECT
  kafka_partition, kafka_offset, t, service_name, service_instance_id, metric_name,
  start_time_unix_nano, time_unix_nano, request_count, failed,
  CASE WHEN CARDINALITY(cumulative) > 0 THEN cumulative END AS latency_buckets,
  CAST(CASE
    WHEN temporality IS DISTINCT FROM 1
      THEN metric_name || ' is not in delta temporality (aggregationTemporality 1); the Collector''s cumulativetodelta processor converts it'
    WHEN COALESCE(unit, 's') <> 's' THEN metric_name || ' is in ' || unit || ', not s'
    WHEN request_count < 0 THEN metric_name || ' data point count is negative'
    WHEN bucket_counts IS NOT NULL AND CARDINALITY(cumulative) = 0
      THEN metric_name || ' data point malformed: explicitBounds must ascend and bucketCounts have one entry more than explicitBounds'
    WHEN request_count > 0 AND COALESCE(CARDINALITY(cumulative), 0) = 0 THEN metric_name || ' data point has no bucketCounts'
  END AS STRING) AS point_reason,
  gauge_value
FROM (
  SELECT
    f.kafka_partition, f.kafka_offset, f.t, f.service_name, f.service_instance_id, f.metric_name, f.unit,
    f.histogram.`aggregationTemporality` AS temporality,
    p.`startTimeUnixNano` AS start_time_unix_nano,
    p.`timeUnixNano` AS time_unix_nano,
    -- proto3 JSON leaves out a count of 0.
    COALESCE(p.`count`, 0) AS request_count,
    ATTRIBUTE_STRING(p.`attributes`, 'error.type') IS NOT NULL AS failed,
    p.`bucketCounts` AS bucket_counts,
    cumulative_buckets(p.`explicitBounds`, p.`bucketCounts`, ARRAY[${latency_bucket_bounds_s}]) AS cumulative,
    CAST(NULL AS DOUBLE) AS gauge_value
  FROM otlp_metrics_flat AS f
  CROSS JOIN UNNEST(f.histogram.`dataPoints`) AS p(
    `attributes`, `startTimeUnixNano`, `timeUnixNano`, `count`, `bucketCounts`, `explicitBounds`)
  WHERE NOT f.late
  UNION ALL
  SELECT
    -- A gauge has no unit to check, and no temporality.
    f.kafka_partition, f.kafka_offset, f.t, f.service_name, f.service_instance_id, f.metric_name,
    CAST(NULL AS STRING), 1, CAST(NULL AS BIGINT), g.`timeUnixNano`, CAST(NULL AS BIGINT), FALSE, CAST(NULL AS ARRAY<BIGINT>),
    CAST(NULL AS ARRAY<BIGINT>), COALESCE(g.`asDouble`, CAST(g.`asInt` AS DOUBLE))
  FROM otlp_metrics_flat AS f
  CROSS JOIN UNNEST(f.gauge.`dataPoints`) AS g(`timeUnixNano`, `asInt`, `asDouble`)
  WHERE NOT f.late
);
