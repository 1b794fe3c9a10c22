-- span_parents: every span once, with its parent's fields where the parent arrived. An interval join
-- on (trace id, parent span id): the parent ends at most max_span_duration after its child (a call
-- it waited for), or at most max_follow_delay before it (one it did not wait for: a message it
-- produced, a fire-and-forget call; clock skew too). One row per span (LEFT join): a root has no parent id, an
-- orphan names a parent that never came (a broken trace). A span naming itself as parent is never
-- paired with itself, so no chain of parents can loop: every step here is one pairwise join.
CREATE TEMPORARY VIEW span_parents AS
SELECT
  c.trace_id,
  c.span_id,
  c.parent_span_id,
  c.service_name,
  c.service_instance_id,
  c.span_name,
  c.span_kind,
  c.status_code,
  c.peer_service,
  c.db_system,
  c.server_address,
  c.start_time_unix_nano,
  c.end_time_unix_nano,
  c.duration_ms,
  c.end_time,
  p.span_id AS parent_found_span_id,
  p.service_name AS parent_service_name,
  p.span_kind AS parent_span_kind,
  p.status_code AS parent_status_code,
  p.duration_ms AS parent_duration_ms,
  p.start_time_unix_nano AS parent_start_time_unix_nano,
  p.end_time_unix_nano AS parent_end_time_unix_nano,
  p.end_time AS parent_end_time,
  c.parent_span_id = c.span_id AS self_parent,
  -- A consumer of messages that links to their producers was started by them, not by a user.
  c.span_kind = 'SPAN_KIND_CONSUMER' AND COALESCE(CARDINALITY(c.links), 0) > 0 AS follows_links
FROM unique_spans AS c
LEFT JOIN unique_spans AS p
  ON c.trace_id = p.trace_id
 AND c.parent_span_id = p.span_id
 AND c.parent_span_id <> c.span_id
 AND p.end_time BETWEEN c.end_time - ${max_follow_delay}
                    AND c.end_time + ${max_span_duration};
