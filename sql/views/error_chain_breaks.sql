-- error_chain_breaks: where error chains stop, newest window first: the service that caught errors
-- of another (or of itself), how many in that window, and a trace to look at.
CREATE TEMPORARY VIEW error_chain_breaks AS
SELECT absorbing_service, failing_service, breaks, window_start_ms, window_end_ms, example_trace_id
FROM stormwatch_error_breaks;
