-- Job topology: stormwatch_spans -> per-window service figures, error breaks and latency stages (edges:
-- jobs/topology_edges.sql). Windows slide by [pipeline.topology] window_slide_seconds over
-- window_size_seconds of span end time (a tumbling window where the two are equal).

INSERT INTO stormwatch_service_windows
SELECT service_name, window_start_ms, window_end_ms, spans, server_spans, errors, error_origins,
       errors_propagated, errors_absorbed, errors_surfaced, q[1], q[2], self_ms, inbound_calls,
       inbound_gap_ms, orphans, self_parents, example_trace_id
FROM (
  SELECT
    service_name,
    EXTRACT(EPOCH FROM window_start) * 1000 AS window_start_ms, EXTRACT(EPOCH FROM window_end) * 1000 AS window_end_ms,
    SUM(spans) AS spans, SUM(server_spans) AS server_spans, SUM(errors) AS errors,
    SUM(errors) - COUNT(DISTINCT error_parent_key) AS error_origins,
    SUM(errors_propagated) AS errors_propagated, SUM(errors_absorbed) AS errors_absorbed,
    SUM(errors_surfaced) AS errors_surfaced,
    PERCENTILE(server_ms, ARRAY[0.5, 0.95]) AS q,
    SUM(self_ms) AS self_ms,
    SUM(inbound_calls) AS inbound_calls, SUM(inbound_gap_ms) AS inbound_gap_ms,
    SUM(orphans) AS orphans, SUM(self_parents) AS self_parents,
    MIN(trace_id) AS example_trace_id
  FROM TABLE(HOP(TABLE service_facts, DESCRIPTOR(t),
                 ${window_slide}, ${window_size}))
  GROUP BY window_start, window_end, service_name
);

INSERT INTO stormwatch_error_breaks
SELECT
  parent_service_name, service_name,
  EXTRACT(EPOCH FROM window_start) * 1000, EXTRACT(EPOCH FROM window_end) * 1000,
  COUNT(*), MIN(trace_id)
FROM TABLE(HOP(TABLE absorbed_errors, DESCRIPTOR(end_time),
               ${window_slide}, ${window_size}))
GROUP BY window_start, window_end, parent_service_name, service_name;

INSERT INTO stormwatch_latency_stages
SELECT
  service_name, span_name, span_kind,
  EXTRACT(EPOCH FROM window_start) * 1000, EXTRACT(EPOCH FROM window_end) * 1000,
  COUNT(*),
  AVG(duration_ms), PERCENTILE(duration_ms, 0.95),
  AVG(self_ms), PERCENTILE(self_ms, 0.95),
  MIN(trace_id)
FROM TABLE(HOP(TABLE span_self_times, DESCRIPTOR(end_time), ${window_slide}, ${window_size}))
GROUP BY window_start, window_end, service_name, span_name, span_kind;

-- Late spans: ended before the watermark, so no window or join takes them any more. Counted and kept.
INSERT INTO stormwatch_dead_letters
SELECT
  '${sink_topic}', kafka_partition, kafka_offset,
  'late span: ended ' || CAST(TIMESTAMPDIFF(SECOND, end_time, CURRENT_WATERMARK(end_time)) AS STRING)
    || ' s before the watermark, beyond the allowed out-of-orderness',
  JSON_OBJECT('traceId' VALUE trace_id, 'spanId' VALUE span_id, 'serviceName' VALUE service_name,
              'name' VALUE span_name, 'endTimeUnixNano' VALUE end_time_unix_nano),
  'topology'
FROM stormwatch_spans
WHERE end_time < CURRENT_WATERMARK(end_time);
