-- otlp_span_rows (encoding otlp_json): every span of every otlp_spans message as one row, unnested on
-- the JVM (resourceSpans -> scopeSpans -> spans), in the shape views/otlp_spans_flat.sql validates and
-- names for both encodings: ids as sent, enums by their OTLP names, attribute lists as OTLP JSON has them.
CREATE TEMPORARY VIEW otlp_span_rows AS
SELECT
  s.`traceId` AS trace_id,
  s.`spanId` AS span_id,
  s.`parentSpanId` AS parent_span_id,
  rs.`resource`.`attributes` AS resource_attributes,
  s.`name` AS span_name,
  CASE s.`kind`
    WHEN 1 THEN 'SPAN_KIND_INTERNAL'
    WHEN 2 THEN 'SPAN_KIND_SERVER'
    WHEN 3 THEN 'SPAN_KIND_CLIENT'
    WHEN 4 THEN 'SPAN_KIND_PRODUCER'
    WHEN 5 THEN 'SPAN_KIND_CONSUMER'
    ELSE 'SPAN_KIND_UNSPECIFIED'
  END AS span_kind,
  CASE s.`status`.`code`
    WHEN 1 THEN 'STATUS_CODE_OK'
    WHEN 2 THEN 'STATUS_CODE_ERROR'
    ELSE 'STATUS_CODE_UNSET'
  END AS status_code,
  s.`status`.`message` AS status_message,
  s.`attributes` AS span_attributes,
  s.`startTimeUnixNano` AS start_time_unix_nano,
  s.`endTimeUnixNano` AS end_time_unix_nano,
  -- Same fields in the same order, under stormwatch_spans' names.
  CAST(s.`links` AS ARRAY<ROW<`trace_id` STRING, `span_id` STRING>>) AS links,
  t.`kafka_partition`,
  t.`kafka_offset`
FROM otlp_spans AS t
CROSS JOIN UNNEST(t.`resourceSpans`) AS rs(`resource`, `scopeSpans`)
CROSS JOIN UNNEST(rs.`scopeSpans`) AS ss(`scope`, `spans`)
CROSS JOIN UNNEST(ss.`spans`) AS s(
  `traceId`, `spanId`, `parentSpanId`, `name`, `kind`, `startTimeUnixNano`, `endTimeUnixNano`, `attributes`, `status`, `links`
);
