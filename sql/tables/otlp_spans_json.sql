-- otlp_spans (encoding otlp_json): one OTLP ExportTraceServiceRequest per message, as the
-- OpenTelemetry Collector's kafka exporter writes it with `encoding: otlp_json`. Field names and integer enums as the OTLP spec defines
-- them; 64-bit integers arrive as JSON strings and are read as BIGINT.
-- A field of the wrong type becomes NULL here (json.ignore-parse-errors) and the span is then sent to
-- the dead letters by the validation in views/otlp_spans_flat.sql; a message that is not JSON at all
-- is caught in its raw text (tables/raw_messages.sql, jobs/not_otlp_json.sql). Nothing is dropped silently.
CREATE TEMPORARY TABLE otlp_spans (
  `resourceSpans` ARRAY<ROW<
    `resource` ROW<
      `attributes` ARRAY<ROW<`key` STRING, `value` ROW<`stringValue` STRING, `intValue` BIGINT, `boolValue` BOOLEAN, `doubleValue` DOUBLE>>>
    >,
    `scopeSpans` ARRAY<ROW<
      `scope` ROW<`name` STRING, `version` STRING>,
      `spans` ARRAY<ROW<
        `traceId` STRING,
        `spanId` STRING,
        `parentSpanId` STRING,
        `name` STRING,
        `kind` INT,
        `startTimeUnixNano` BIGINT,
        `endTimeUnixNano` BIGINT,
        `attributes` ARRAY<ROW<`key` STRING, `value` ROW<`stringValue` STRING, `intValue` BIGINT, `boolValue` BOOLEAN, `doubleValue` DOUBLE>>>,
        `status` ROW<`code` INT, `message` STRING>,
        `links` ARRAY<ROW<`traceId` STRING, `spanId` STRING>>
      >>
    >>
  >>,
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL
) WITH (
  ${source_options},
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);
