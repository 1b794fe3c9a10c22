-- stormwatch_error_breaks: where error chains stop. Per window, a failing span in `failing_service`
-- whose parent in `absorbing_service` did not fail: the error was caught there. Same-service breaks
-- count too (a handler catching its own repository's exception).
CREATE TEMPORARY TABLE stormwatch_error_breaks (
  `absorbing_service` STRING,
  `failing_service` STRING,
  `window_start_ms` BIGINT,
  `window_end_ms` BIGINT,
  `breaks` BIGINT,
  `example_trace_id` STRING
) WITH (
  ${error_breaks_options},
  'key.format' = 'json',
  'key.fields' = 'absorbing_service;failing_service',
  'value.format' = 'json',
  'value.fields-include' = 'ALL'
);
