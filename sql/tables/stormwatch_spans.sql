-- stormwatch_spans: one row per valid span, keyed by trace id so a trace's spans share a partition.
-- Enum values carry the OTLP enum names (SPAN_KIND_SERVER, STATUS_CODE_ERROR). Event time is the
-- span's end, with a watermark of bounded out-of-orderness from [pipeline.spans] in the configuration.
CREATE TEMPORARY TABLE stormwatch_spans (
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
  `start_time_unix_nano` BIGINT,
  `end_time_unix_nano` BIGINT,
  `duration_ms` DOUBLE,
  `end_time` AS TO_TIMESTAMP_LTZ(`end_time_unix_nano` / 1000000, 3),
  -- Arrival order, for keeping the first copy of a span exported twice (views/unique_spans.sql).
  `arrival_time` AS PROCTIME(),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `end_time` AS `end_time` - ${watermark_out_of_orderness}
) WITH (
  ${spans_options},
  'key.format' = 'raw',
  'key.fields' = 'trace_id',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
