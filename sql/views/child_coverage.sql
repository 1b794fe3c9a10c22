-- child_coverage: for each span with children, how much of its own interval its children cover,
-- per tumbling bucket of the slide (the parent's end time decides the bucket, so the parent and
-- its coverage always fall into the same sliding windows downstream).
-- Covered time is min(sum of the children's durations, the children's hull clipped to the parent):
-- exact when the children run one after another or cover the hull without gaps, an upper bound of
-- the union where parallel children leave gaps, so exclusive (self) time is never overstated.
CREATE TEMPORARY VIEW child_coverage AS
SELECT
  window_time AS t,
  trace_id,
  parent_span_id AS span_id,
  parent_service_name AS service_name,
  GREATEST(0.0, LEAST(
    SUM(duration_ms),
    MAX(parent_duration_ms),
    CAST(LEAST(MAX(end_time_unix_nano), MAX(parent_end_time_unix_nano))
         - GREATEST(MIN(start_time_unix_nano), MIN(parent_start_time_unix_nano)) AS DOUBLE) / 1000000
  )) AS covered_ms
FROM TABLE(TUMBLE(TABLE span_pairs, DESCRIPTOR(parent_end_time), ${window_slide}))
GROUP BY window_start, window_end, window_time, trace_id, parent_span_id, parent_service_name;
