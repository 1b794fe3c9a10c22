-- otlp_spans_flat: every span of every otlp_spans message as one row, flattened on the JVM with
-- CROSS JOIN UNNEST (resourceSpans -> scopeSpans -> spans). `reject_reason` is NULL for a valid span
-- and says what is wrong otherwise; jobs route rejected spans to the dead letters.
-- ATTRIBUTE_STRING(attributes, 'key') is expanded by stormwatch/sqlfiles.py into a lookup of the
-- OTLP key/value list (Flink SQL has no function for it, and a lateral join over UNNEST is wrong in 2.2).
CREATE TEMPORARY VIEW otlp_spans_flat AS
SELECT
  LOWER(s.`traceId`) AS trace_id,
  LOWER(s.`spanId`) AS span_id,
  NULLIF(LOWER(s.`parentSpanId`), '') AS parent_span_id,
  -- The SDK default when a resource names no service (OTel resource semantic conventions).
  COALESCE(ATTRIBUTE_STRING(rs.`resource`.`attributes`, 'service.name'), 'unknown_service') AS service_name,
  -- service.instance.id, else k8s.pod.name, else host.name (stormwatch/sqlfiles.py).
  INSTANCE_ID(rs.`resource`.`attributes`) AS service_instance_id,
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
  -- Who a CLIENT span calls when the callee is not traced (databases, LLM APIs, queues): the
  -- current semantic-convention names first, then the ones they replaced.
  COALESCE(ATTRIBUTE_STRING(s.`attributes`, 'service.peer.name'), ATTRIBUTE_STRING(s.`attributes`, 'peer.service'))
    AS peer_service,
  COALESCE(ATTRIBUTE_STRING(s.`attributes`, 'db.system.name'), ATTRIBUTE_STRING(s.`attributes`, 'db.system'))
    AS db_system,
  ATTRIBUTE_STRING(s.`attributes`, 'server.address') AS server_address,
  s.`startTimeUnixNano` AS start_time_unix_nano,
  s.`endTimeUnixNano` AS end_time_unix_nano,
  CAST(s.`endTimeUnixNano` - s.`startTimeUnixNano` AS DOUBLE) / 1000000 AS duration_ms,
  CASE
    WHEN s.`traceId` IS NULL THEN 'traceId missing or not a string'
    WHEN NOT REGEXP(s.`traceId`, '^[0-9a-fA-F]{32}$') THEN 'traceId is not 32 hex digits'
    WHEN REGEXP(s.`traceId`, '^0+$') THEN 'traceId is all zeros'
    WHEN s.`spanId` IS NULL THEN 'spanId missing or not a string'
    WHEN NOT REGEXP(s.`spanId`, '^[0-9a-fA-F]{16}$') THEN 'spanId is not 16 hex digits'
    WHEN REGEXP(s.`spanId`, '^0+$') THEN 'spanId is all zeros'
    WHEN COALESCE(s.`parentSpanId`, '') <> '' AND NOT REGEXP(s.`parentSpanId`, '^[0-9a-fA-F]{16}$')
      THEN 'parentSpanId is neither empty nor 16 hex digits'
    WHEN s.`startTimeUnixNano` IS NULL OR s.`endTimeUnixNano` IS NULL
      THEN 'startTimeUnixNano or endTimeUnixNano missing or not an integer'
    WHEN s.`endTimeUnixNano` < s.`startTimeUnixNano` THEN 'endTimeUnixNano is before startTimeUnixNano'
  END AS reject_reason,
  t.`kafka_partition`,
  t.`kafka_offset`
FROM otlp_spans AS t
CROSS JOIN UNNEST(t.`resourceSpans`) AS rs(`resource`, `scopeSpans`)
CROSS JOIN UNNEST(rs.`scopeSpans`) AS ss(`scope`, `spans`)
CROSS JOIN UNNEST(ss.`spans`) AS s(
  `traceId`, `spanId`, `parentSpanId`, `name`, `kind`, `startTimeUnixNano`, `endTimeUnixNano`, `attributes`, `status`
);
