-- The span path's window partials by kind, named: what the trace assembler (udfs/traces/,
-- attached by jobs/spans.py as the view trace_partials) accumulated per entity and slide bucket
-- [bucket_start_ms, + window_slide) from every assembled trace (TraceFacts: one pass per trace). Counts
-- and sums add and histograms merge, so a window's figures are the merge of its buckets' partials
-- (sql/jobs/spans.sql). Positions of n (counts) and d (sums) as io.stormwatch.flink.traces.Partials
-- names them; h1/h2 are sparse log-scale histograms (MERGE_HISTOGRAMS, HISTOGRAM_QUANTILE).
CREATE TEMPORARY VIEW edge_partials AS
SELECT k1 AS caller, k2 AS callee, flag AS callee_virtual, n[1] AS calls, n[2] AS client_errors,
       n[3] AS server_errors, n[4] AS retries, d[1] AS gap_ms, h1 AS latency_histogram, b AS latency_buckets,
       ex1 AS example_trace_id, ex2 AS example_error_trace_id, rowtime
FROM trace_partials WHERE kind = 'EDGE';

CREATE TEMPORARY VIEW service_partials AS
SELECT k1 AS service_name, n[1] AS spans, n[2] AS server_spans, n[3] AS errors, n[4] AS error_origins,
       n[5] AS errors_propagated, n[6] AS errors_absorbed, n[7] AS errors_surfaced, n[8] AS inbound_calls,
       n[9] AS orphans, n[10] AS self_parents, d[1] AS self_ms, d[2] AS inbound_gap_ms,
       h1 AS server_histogram, ex1 AS example_trace_id, rowtime
FROM trace_partials WHERE kind = 'SERVICE';

CREATE TEMPORARY VIEW break_partials AS
SELECT k1 AS absorbing_service, k2 AS failing_service, n[1] AS breaks, ex1 AS example_trace_id, rowtime
FROM trace_partials WHERE kind = 'BREAK';

-- INSTANCE partials (and the assembler's progress marks, kind MARK) go to stormwatch_span_instances
-- unmerged, straight from trace_partials (sql/jobs/spans.sql).

CREATE TEMPORARY VIEW stage_partials AS
SELECT k1 AS service_name, k2 AS span_name, k3 AS span_kind, n[1] AS spans, d[1] AS duration_ms,
       d[2] AS self_ms, h1 AS duration_histogram, h2 AS self_histogram, ex1 AS example_trace_id, rowtime
FROM trace_partials WHERE kind = 'STAGE';
