-- stormwatch_edges: per service edge (caller -> callee) and window, what crossed it. Virtual nodes:
-- caller `user` for the roots of traces, a callee named by peer.service / db.system / server.address
-- (callee_virtual) for calls into what is not traced. Latency is the caller's view where the caller
-- has a CLIENT span; latency_buckets counts calls at or under each bound of latency_bucket_bounds_ms
-- (cumulative, as Prometheus `le` buckets). Retries: calls that repeat an earlier attempt of the same
-- logical call (same calling span, name and callee, after a failure or while it was in flight: a hedge;
-- io.stormwatch.flink.traces.TraceFacts); amplification = calls / logical_calls (1.0 without retries). Each edge comes in two window kinds: `sliding`, the
-- windows the suspects and health jobs read (views/sliding_edges.sql), and `tumbling`, where each call
-- is counted once. Keyed by caller and callee.
CREATE TEMPORARY TABLE stormwatch_edges (
  `caller` STRING,
  `callee` STRING,
  `callee_virtual` BOOLEAN,
  `window_kind` STRING,
  `window_start_ms` BIGINT,
  `window_end_ms` BIGINT,
  `calls` BIGINT,
  `client_errors` BIGINT,
  `server_errors` BIGINT,
  `retries` BIGINT,
  `logical_calls` BIGINT,
  `amplification` DOUBLE,
  `latency_p50_ms` DOUBLE,
  `latency_p95_ms` DOUBLE,
  `latency_p99_ms` DOUBLE,
  `latency_bucket_bounds_ms` ARRAY<DOUBLE>,
  `latency_buckets` ARRAY<BIGINT>,
  `gap_ms_total` DOUBLE,
  `example_trace_id` STRING,
  `example_error_trace_id` STRING,
  -- Read back by the suspects job: a window's records are complete once the watermark passes its end.
  `window_end_time` AS TO_TIMESTAMP_LTZ(`window_end_ms`, 3),
  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  WATERMARK FOR `window_end_time` AS `window_end_time` - ${watermark_out_of_orderness}
) WITH (
  ${edges_options},
  'key.format' = 'json',
  'key.fields' = 'caller;callee',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
