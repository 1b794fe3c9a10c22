-- Job health, its SQL part: metrics records and messages it cannot use -> stormwatch_dead_letters (OTLP
-- messages that are not OTLP JSON at all: jobs/not_otlp_json.sql, rendered by jobs/health.py). The windows
-- (views/instance_windows.sql) go on to the Python decisions (jobs/health.py) and to
-- stormwatch_instance_windows.

-- Records of either source, native or folded from OTLP.
INSERT INTO stormwatch_dead_letters
SELECT
  source_topic, kafka_partition, kafka_offset, reject_reason,
  JSON_OBJECT(
    'service_name' VALUE service_name, 'service_instance_id' VALUE service_instance_id,
    'time_unix_nano' VALUE time_unix_nano, 'requests' VALUE requests, 'errors' VALUE errors
  ),
  'health'
FROM instance_metrics_checked
WHERE reject_reason IS NOT NULL;

INSERT INTO stormwatch_dead_letters
SELECT
  '${metrics_topic}', kafka_partition, kafka_offset,
  CASE WHEN payload IS NULL OR payload = '' THEN 'empty message' ELSE 'not a JSON object' END,
  SUBSTRING(payload FROM 1 FOR ${dead_letter_payload_max_chars}),
  'health'
FROM stormwatch_instance_metrics_raw
WHERE payload IS NULL OR NOT (payload IS JSON OBJECT);

-- OTLP messages without an event time or behind the watermark: the fold would drop them
-- (views/otlp_metrics_flat.sql). One without resources holds nothing (or is not OTLP: jobs/not_otlp_json.sql).
INSERT INTO stormwatch_dead_letters
SELECT
  '${otlp_metrics_topic}', kafka_partition, kafka_offset,
  CASE
    WHEN t = TO_TIMESTAMP_LTZ(0, 3) THEN 'its first data point has no timeUnixNano: the message has no event time'
    ELSE 'late metrics message: behind the watermark, the windows of its first data point''s time are closed'
  END,
  JSON_OBJECT('event_time' VALUE CAST(t AS STRING)),
  'health'
FROM otlp_metrics_arrived
WHERE late AND CARDINALITY(`resourceMetrics`) > 0;
