-- stormwatch_latency_stages: per stage of a request path (service + operation, i.e. span name) and
-- window, how long it took and how much of that was its own (self) time rather than its children's.
-- An LLM chain's routing -> tokenizer -> KV-cache load -> per-token decode are such stages.
CREATE TEMPORARY TABLE stormwatch_latency_stages (
  `service` STRING,
  `operation` STRING,
  `span_kind` STRING,
  `window_start_ms` BIGINT,
  `window_end_ms` BIGINT,
  `spans` BIGINT,
  `duration_mean_ms` DOUBLE,
  `duration_p95_ms` DOUBLE,
  `self_mean_ms` DOUBLE,
  `self_p95_ms` DOUBLE,
  `example_trace_id` STRING
) WITH (
  ${latency_stages_options},
  'key.format' = 'json',
  'key.fields' = 'service;operation',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
