-- stormwatch's Java SQL functions (udfs/java/, built by `make bootstrap` into runtime/jars/flink/,
-- which every job ships in pipeline.jars): what Flink SQL lacks, on the JVM.
-- OTLP_JSON_ERROR(payload, 'resourceSpans', 'ExportTraceServiceRequest'): why a message is not that OTLP
-- JSON request, down to the objects and arrays its table reads; NULL if it is one. (Trace messages are
-- judged by the `otlp` format itself, sql/tables/otlp_spans.sql, with the same check.)
CREATE TEMPORARY FUNCTION IF NOT EXISTS OTLP_JSON_ERROR AS 'io.stormwatch.flink.OtlpJsonError' LANGUAGE JAVA;
-- MERGE_HISTOGRAMS(h): the sum of sparse log-scale latency histograms ((bucket, count) pairs, 1 % wide
-- buckets: io.stormwatch.flink.traces.LogHistogram) over a group; the span path's second phase.
CREATE TEMPORARY FUNCTION IF NOT EXISTS MERGE_HISTOGRAMS AS 'io.stormwatch.flink.MergeHistograms' LANGUAGE JAVA;
-- HISTOGRAM_QUANTILE(h, q): the q-quantile of such a histogram, within 1 %; NULL when it is empty.
CREATE TEMPORARY FUNCTION IF NOT EXISTS HISTOGRAM_QUANTILE AS 'io.stormwatch.flink.HistogramQuantile' LANGUAGE JAVA;
