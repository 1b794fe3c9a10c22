-- span_pairs: the spans whose parent arrived, with it (a window table function takes a named table).
CREATE TEMPORARY VIEW span_pairs AS
SELECT * FROM span_parents WHERE parent_found_span_id IS NOT NULL;

-- absorbed_errors: failing spans whose parent did not fail: where an error chain stops.
CREATE TEMPORARY VIEW absorbed_errors AS
SELECT * FROM span_pairs
WHERE status_code = 'STATUS_CODE_ERROR' AND parent_status_code <> 'STATUS_CODE_ERROR';
