-- Job health, its SQL part: metrics records it cannot use -> stormwatch_dead_letters. The windows
-- (views/instance_windows.sql) go on to the Python decisions (jobs/health.py) and to
-- stormwatch_instance_windows.

INSERT INTO stormwatch_dead_letters
SELECT
  '${metrics_topic}', kafka_partition, kafka_offset, reject_reason,
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
