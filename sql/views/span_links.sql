-- span_links: messaging calls through OTLP span links. A CONSUMER span (often a root of its own trace,
-- processing a batch) names the producer spans of its messages in `links`, not as its parent. Each
-- link is paired with the span it names by an interval join like the parent's (views/span_parents.sql):
-- the producer ends before its consumer, by at most [pipeline.topology] max_follow_delay_seconds (time
-- in the queue included), or a little after it under clock skew. A link to the consumer's own parent is
-- that parent-child call already; a link within one service is not a call between services.
-- Only a CONSUMER span's links to PRODUCER spans make calls: a message's link names the span that sent
-- or created it (OpenTelemetry messaging conventions); links for other reasons (a request resuming an
-- earlier one) are no call. And holding every span for max_follow_delay would double the join state.
CREATE TEMPORARY VIEW span_links AS
SELECT
  c.trace_id,
  c.service_name,
  c.status_code,
  c.duration_ms,
  p.service_name AS producer_service_name,
  p.status_code AS producer_status_code,
  p.end_time AS producer_end_time
FROM (
  SELECT s.*, LOWER(l.trace_id) AS linked_trace_id, LOWER(l.span_id) AS linked_span_id
  FROM unique_spans AS s
  CROSS JOIN UNNEST(s.links) AS l(trace_id, span_id)
  WHERE s.span_kind = 'SPAN_KIND_CONSUMER'
) AS c
JOIN (SELECT * FROM unique_spans WHERE span_kind = 'SPAN_KIND_PRODUCER') AS p
  ON p.trace_id = c.linked_trace_id
 AND p.span_id = c.linked_span_id
 AND p.end_time BETWEEN c.end_time - ${max_follow_delay}
                    AND c.end_time + ${clock_skew}
WHERE p.service_name <> c.service_name
  AND NOT (c.linked_trace_id = c.trace_id AND c.linked_span_id = COALESCE(c.parent_span_id, ''));
