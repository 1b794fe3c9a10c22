-- otlp_span_rows (encoding otlp_proto): every span of every otlp_spans message as one row, unnested on
-- the JVM (resource_spans -> scope_spans -> spans), in the shape of views/otlp_span_rows_json.sql: ids
-- in lowercase hex (HEX_BYTES, sql/functions/), an enum value the .proto does not name as unspecified,
-- attribute lists cast to OTLP JSON's field names (same fields, same order).
CREATE TEMPORARY VIEW otlp_span_rows AS
SELECT
  HEX_BYTES(s.`trace_id`) AS trace_id,
  HEX_BYTES(s.`span_id`) AS span_id,
  HEX_BYTES(s.`parent_span_id`) AS parent_span_id,
  CAST(rs.`resource`.`attributes` AS
       ARRAY<ROW<`key` STRING, `value` ROW<`stringValue` STRING, `intValue` BIGINT, `boolValue` BOOLEAN, `doubleValue` DOUBLE>>>) AS resource_attributes,
  s.`name` AS span_name,
  CASE WHEN s.`kind` IN ('SPAN_KIND_INTERNAL', 'SPAN_KIND_SERVER', 'SPAN_KIND_CLIENT', 'SPAN_KIND_PRODUCER',
                         'SPAN_KIND_CONSUMER') THEN s.`kind` ELSE 'SPAN_KIND_UNSPECIFIED' END AS span_kind,
  CASE WHEN s.`status`.`code` IN ('STATUS_CODE_OK', 'STATUS_CODE_ERROR') THEN s.`status`.`code`
       ELSE 'STATUS_CODE_UNSET' END AS status_code,
  -- proto3 writes an unset string as empty; OTLP JSON leaves it out.
  NULLIF(s.`status`.`message`, '') AS status_message,
  CAST(s.`attributes` AS
       ARRAY<ROW<`key` STRING, `value` ROW<`stringValue` STRING, `intValue` BIGINT, `boolValue` BOOLEAN, `doubleValue` DOUBLE>>>) AS span_attributes,
  s.`start_time_unix_nano` AS start_time_unix_nano,
  s.`end_time_unix_nano` AS end_time_unix_nano,
  HEX_LINKS(s.`links`) AS links,
  t.`kafka_partition`,
  t.`kafka_offset`
FROM otlp_spans AS t
CROSS JOIN UNNEST(t.`resource_spans`) AS rs(`resource`, `scope_spans`)
CROSS JOIN UNNEST(rs.`scope_spans`) AS ss(`scope`, `spans`)
CROSS JOIN UNNEST(ss.`spans`) AS s(
  `trace_id`, `span_id`, `parent_span_id`, `name`, `kind`, `start_time_unix_nano`, `end_time_unix_nano`, `attributes`, `status`, `links`
);
