-- otlp_spans (encoding otlp_proto): one OTLP ExportTraceServiceRequest per message, as the
-- OpenTelemetry Collector's kafka exporter writes it by default (`encoding: otlp_proto`), decoded on the
-- JVM by Flink's protobuf format with the OTLP classes (io.opentelemetry.proto, jvm/pom.xml).
-- Columns are the OTLP .proto field names, only those stormwatch reads: AnyValue's recursive array and
-- key/value-list members are left out, so the format never expands them. Ids are bytes, enums their
-- names (SPAN_KIND_SERVER), as in the .proto. A message that does not decode is skipped here and sent to
-- the dead letters with its reason from its raw bytes (jobs/not_otlp_proto.sql): nothing is lost.
CREATE TEMPORARY TABLE otlp_spans (
  `resource_spans` ARRAY<ROW<
    `resource` ROW<
      `attributes` ARRAY<ROW<`key` STRING, `value` ROW<`string_value` STRING, `int_value` BIGINT, `bool_value` BOOLEAN, `double_value` DOUBLE>>>
    >,
    `scope_spans` ARRAY<ROW<
      `scope` ROW<`name` STRING, `version` STRING>,
      `spans` ARRAY<ROW<
        `trace_id` BYTES,
        `span_id` BYTES,
        `parent_span_id` BYTES,
        `name` STRING,
        `kind` STRING,
        `start_time_unix_nano` BIGINT,
        `end_time_unix_nano` BIGINT,
        `attributes` ARRAY<ROW<`key` STRING, `value` ROW<`string_value` STRING, `int_value` BIGINT, `bool_value` BOOLEAN, `double_value` DOUBLE>>>,
        `status` ROW<`message` STRING, `code` STRING>,
        `links` ARRAY<ROW<`trace_id` BYTES, `span_id` BYTES>>
      >>
    >>
  >>,
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL
) WITH (
  ${source_options},
  'format' = 'protobuf',
  'protobuf.message-class-name' = 'io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
  'protobuf.ignore-parse-errors' = 'true'
);
