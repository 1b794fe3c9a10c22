-- stormwatch_spans: one row per valid span, keyed by trace id. Enum values carry the OTLP enum names
-- (SPAN_KIND_SERVER, STATUS_CODE_ERROR). Event time is the span's end, with a watermark of bounded
-- out-of-orderness from [pipeline.spans] in the configuration.
-- Each flatten_spans subtask writes to a partition of its own ('fixed'), so a partition holds the spans
-- of the input partitions one subtask reads, in their order. Partitioned by trace id instead, every
-- partition would mix all subtasks, and subtasks catching up a backlog at different speeds would put
-- their spans out of event-time order by however far they drift apart: late for the next jobs.
-- A partition no subtask writes (fewer subtasks than partitions) goes idle after the idle timeout
-- rather than hold every reader's watermark back.
-- The columns are written out here, not taken from tables/otlp_spans.sql though most are the same:
-- this is a published record (schemas/stormwatch_spans.schema.json) that the decoder's own columns
-- (reject_reason, dead_letter_payload, and any it gains) must not change.
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
  -- OTLP span links: the spans this one follows from in other traces or batches (messaging).
  `links` ARRAY<ROW<`trace_id` STRING, `span_id` STRING>>,
  `start_time_unix_nano` BIGINT,
  `end_time_unix_nano` BIGINT,
  `duration_ms` DOUBLE,
  `end_time` AS TO_TIMESTAMP_LTZ(`end_time_unix_nano` / 1000000, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `end_time` AS `end_time` - ${watermark_out_of_orderness}
) WITH (
  ${spans_options},
  'sink.partitioner' = 'fixed',
  'scan.watermark.idle-timeout' = '${spans_idle_timeout}',
  'key.format' = 'raw',
  'key.fields' = 'trace_id',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
