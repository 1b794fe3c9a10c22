-- otlp_metrics: one OTLP ExportMetricsServiceRequest per message, as the OpenTelemetry Collector's kafka
-- exporter writes it with `encoding: otlp_json`. Field names and integer enums as the OTLP spec defines
-- them; 64-bit integers (times, counts, asInt) arrive as JSON strings and are read as BIGINT. Declared:
-- what the health job reads (histogram and gauge data points, views/otlp_metrics_flat.sql) and, of the
-- other metric types, only the time of their data points.
-- Event time `t` of a message: the timeUnixNano of its first data point. An SDK exports the metrics of
-- one collection at one time, and the exporter writes what it is given as one message; a message
-- without that time gets epoch 0: it is then late, never a NULL event time that fails the job.
-- A field of the wrong type becomes NULL (json.ignore-parse-errors) and the record it belongs to is
-- sent to the dead letters by views/instance_metrics_checked.sql; a message that is not JSON at all is
-- caught in its raw text (tables/raw_messages.sql, jobs/not_otlp_json.sql). Nothing is dropped silently.
CREATE TEMPORARY TABLE otlp_metrics (
  `resourceMetrics` ARRAY<ROW<
    `resource` ROW<`attributes` ARRAY<ROW<`key` STRING, `value` ROW<`stringValue` STRING>>>>,
    `scopeMetrics` ARRAY<ROW<
      `metrics` ARRAY<ROW<
        `name` STRING,
        `unit` STRING,
        `histogram` ROW<
          `dataPoints` ARRAY<ROW<
            `attributes` ARRAY<ROW<`key` STRING, `value` ROW<`stringValue` STRING>>>,
            `startTimeUnixNano` BIGINT,
            `timeUnixNano` BIGINT,
            `count` BIGINT,
            `bucketCounts` ARRAY<BIGINT>,
            `explicitBounds` ARRAY<DOUBLE>
          >>,
          `aggregationTemporality` INT
        >,
        `gauge` ROW<`dataPoints` ARRAY<ROW<`timeUnixNano` BIGINT, `asInt` BIGINT, `asDouble` DOUBLE>>>,
        `sum` ROW<`dataPoints` ARRAY<ROW<`timeUnixNano` BIGINT>>>,
        `summary` ROW<`dataPoints` ARRAY<ROW<`timeUnixNano` BIGINT>>>,
        `exponentialHistogram` ROW<`dataPoints` ARRAY<ROW<`timeUnixNano` BIGINT>>>
      >>
    >>
  >>,
  `t` AS TO_TIMESTAMP_LTZ(COALESCE(
    `resourceMetrics`[1].`scopeMetrics`[1].`metrics`[1].`histogram`.`dataPoints`[1].`timeUnixNano`,
    `resourceMetrics`[1].`scopeMetrics`[1].`metrics`[1].`gauge`.`dataPoints`[1].`timeUnixNano`,
    `resourceMetrics`[1].`scopeMetrics`[1].`metrics`[1].`sum`.`dataPoints`[1].`timeUnixNano`,
    `resourceMetrics`[1].`scopeMetrics`[1].`metrics`[1].`summary`.`dataPoints`[1].`timeUnixNano`,
    `resourceMetrics`[1].`scopeMetrics`[1].`metrics`[1].`exponentialHistogram`.`dataPoints`[1].`timeUnixNano`,
    0) / 1000000, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `t` AS `t` - ${watermark_out_of_orderness}
) WITH (
  ${otlp_metrics_options},
  'scan.watermark.idle-timeout' = '${idle_timeout}',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
