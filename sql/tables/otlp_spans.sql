-- otlp_spans: the OTLP trace messages of the source topic, one row per span, decoded once per message
-- on the JVM by the `otlp` format (connectors/java/, io.stormwatch.flink.otlp) in the encoding the
-- Collector's kafka exporter writes ([pipeline.spans] encoding: auto, each message in the one it is in;
-- or only otlp_json, or only otlp_proto).
-- Every span is a row: `reject_reason` is NULL for a valid one; otherwise it says what is wrong and
-- `dead_letter_payload` holds the span's ids, names and times as JSON. A message that does not decode
-- (or breaks OTLP JSON's shape) is one more row with its reason and the message as payload. Nothing is
-- dropped: readers route rejected rows to the dead letters.
-- Ids are lowercase hex, enums their OTLP names (SPAN_KIND_SERVER, STATUS_CODE_ERROR); attributes as
-- the semantic conventions name them, current names first. Event time is the span's end; a rejected
-- row's end_time_unix_nano is 0, so it never moves the watermark.
CREATE TEMPORARY TABLE otlp_spans (
  `trace_id` STRING,
  `span_id` STRING,
  `parent_span_id` STRING,
  `service_name` STRING,
  `service_instance_id` STRING,
  `span_name` STRING,
  `span_kind` STRING,
  `status_code` STRING,
  `status_message` STRING,
  `peer_service` STRING,
  `db_system` STRING,
  `server_address` STRING,
  `links` ARRAY<ROW<`trace_id` STRING, `span_id` STRING>>,
  `start_time_unix_nano` BIGINT,
  `end_time_unix_nano` BIGINT,
  `duration_ms` DOUBLE,
  `reject_reason` STRING,
  `dead_letter_payload` STRING,
  `end_time` AS TO_TIMESTAMP_LTZ(`end_time_unix_nano` / 1000000, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `end_time` AS `end_time` - ${watermark_out_of_orderness}
) WITH (
  ${source_options},
  'scan.watermark.idle-timeout' = '${spans_idle_timeout}',
  'format' = 'otlp',
  'otlp.encoding' = '${spans_encoding}',
  'otlp.future-limit-seconds' = '${future_limit_seconds}',
  'otlp.payload-max-chars' = '${dead_letter_payload_max_chars}'
);
