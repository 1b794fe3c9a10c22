-- span_self_times: every span with its exclusive (self) time: its duration minus what its children
-- cover (views/child_coverage.sql). A span without children keeps its whole duration. The coverage
-- of a span is stamped with the end of the tumbling bucket its parent's end falls into, hence the
-- one-slide interval.
CREATE TEMPORARY VIEW span_self_times AS
SELECT
  s.service_name,
  s.span_name,
  s.span_kind,
  s.trace_id,
  s.duration_ms,
  GREATEST(0.0, s.duration_ms - COALESCE(c.covered_ms, 0.0)) AS self_ms,
  s.end_time
FROM unique_spans AS s
LEFT JOIN child_coverage AS c
  ON c.trace_id = s.trace_id
 AND c.span_id = s.span_id
 AND c.t BETWEEN s.end_time AND s.end_time + ${window_slide};
