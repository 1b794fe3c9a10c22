-- otlp_spans_flat: every span of otlp_spans as one valid row or one rejected row, whichever encoding
-- the topic carries: views/otlp_span_rows_json.sql or views/otlp_span_rows_proto.sql unnest the
-- messages on the JVM into one shape, and this view names and validates it. `reject_reason` is NULL for
-- a valid span and says what is wrong otherwise; jobs route rejected spans to the dead letters.
-- ATTRIBUTE_STRING(attributes, 'key') is expanded by stormwatch/sqlfiles.py into a lookup of the
-- OTLP key/value list (Flink SQL has no function for it, and a lateral join over UNNEST is wrong in 2.2).
CREATE TEMPORARY VIEW otlp_spans_flat AS
SELECT
  LOWER(trace_id) AS trace_id,
  LOWER(span_id) AS span_id,
  NULLIF(LOWER(parent_span_id), '') AS parent_span_id,
  -- The SDK default when a resource names no service (OTel resource semantic conventions).
  COALESCE(ATTRIBUTE_STRING(resource_attributes, 'service.name'), 'unknown_service') AS service_name,
  -- service.instance.id, else k8s.pod.name, else host.name (stormwatch/sqlfiles.py).
  INSTANCE_ID(resource_attributes) AS service_instance_id,
  span_name,
  span_kind,
  status_code,
  status_message,
  -- Who a CLIENT span calls when the callee is not traced (databases, LLM APIs, queues): the
  -- current semantic-convention names first, then the ones they replaced.
  COALESCE(ATTRIBUTE_STRING(span_attributes, 'service.peer.name'), ATTRIBUTE_STRING(span_attributes, 'peer.service'))
    AS peer_service,
  COALESCE(ATTRIBUTE_STRING(span_attributes, 'db.system.name'), ATTRIBUTE_STRING(span_attributes, 'db.system'))
    AS db_system,
  ATTRIBUTE_STRING(span_attributes, 'server.address') AS server_address,
  -- Spans this one is linked to (a consumer to the producers of its messages): ids as sent, lower-cased
  -- where they are used (views/span_links.sql).
  links,
  start_time_unix_nano,
  end_time_unix_nano,
  CAST(end_time_unix_nano - start_time_unix_nano AS DOUBLE) / 1000000 AS duration_ms,
  CASE
    WHEN trace_id IS NULL THEN 'traceId missing or not a string'
    WHEN NOT REGEXP(trace_id, '^[0-9a-fA-F]{32}$') THEN 'traceId is not 32 hex digits'
    WHEN REGEXP(trace_id, '^0+$') THEN 'traceId is all zeros'
    WHEN span_id IS NULL THEN 'spanId missing or not a string'
    WHEN NOT REGEXP(span_id, '^[0-9a-fA-F]{16}$') THEN 'spanId is not 16 hex digits'
    WHEN REGEXP(span_id, '^0+$') THEN 'spanId is all zeros'
    WHEN COALESCE(parent_span_id, '') <> '' AND NOT REGEXP(parent_span_id, '^[0-9a-fA-F]{16}$')
      THEN 'parentSpanId is neither empty nor 16 hex digits'
    -- Zero is how protobuf writes a time that was never set.
    WHEN start_time_unix_nano IS NULL OR end_time_unix_nano IS NULL
      OR start_time_unix_nano = 0 OR end_time_unix_nano = 0
      THEN 'startTimeUnixNano or endTimeUnixNano missing, zero or not an integer'
    WHEN end_time_unix_nano < start_time_unix_nano THEN 'endTimeUnixNano is before startTimeUnixNano'
    WHEN end_time_unix_nano / 1000000000 > UNIX_TIMESTAMP() + ${future_limit_seconds}
      THEN 'endTimeUnixNano is more than ${future_limit_seconds} s ahead of the clock'
  END AS reject_reason,
  kafka_partition,
  kafka_offset
FROM otlp_span_rows;
