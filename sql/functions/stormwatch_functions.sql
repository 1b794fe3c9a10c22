-- stormwatch's Java SQL functions (jvm/functions/, built by `make bootstrap` into runtime/jars/flink/,
-- which every job ships in pipeline.jars): what Flink SQL lacks, on the JVM.
-- HEX_BYTES(bytes): lowercase hex, as OTLP JSON writes the trace and span ids protobuf carries as bytes.
CREATE TEMPORARY FUNCTION IF NOT EXISTS HEX_BYTES AS 'io.stormwatch.flink.HexBytes' LANGUAGE JAVA;
-- HEX_LINKS(links): a protobuf span's links, ids as HEX_BYTES writes them.
CREATE TEMPORARY FUNCTION IF NOT EXISTS HEX_LINKS AS 'io.stormwatch.flink.HexLinks' LANGUAGE JAVA;
-- PROTOBUF_ERROR(payload, 'java.Class'): why a message is not that protobuf message; NULL if it is one.
CREATE TEMPORARY FUNCTION IF NOT EXISTS PROTOBUF_ERROR AS 'io.stormwatch.flink.ProtobufError' LANGUAGE JAVA;
-- OTLP_JSON_ERROR(payload, 'resourceSpans', 'ExportTraceServiceRequest'): why a message is not that OTLP
-- JSON request, down to the objects and arrays its table reads; NULL if it is one.
CREATE TEMPORARY FUNCTION IF NOT EXISTS OTLP_JSON_ERROR AS 'io.stormwatch.flink.OtlpJsonError' LANGUAGE JAVA;
-- MERGE_HISTOGRAMS(h): the sum of sparse log-scale latency histograms ((bucket, count) pairs, 1 % wide
-- buckets: io.stormwatch.flink.traces.LogHistogram) over a group; the span path's second phase.
CREATE TEMPORARY FUNCTION IF NOT EXISTS MERGE_HISTOGRAMS AS 'io.stormwatch.flink.MergeHistograms' LANGUAGE JAVA;
-- HISTOGRAM_QUANTILE(h, q): the q-quantile of such a histogram, within 1 %; NULL when it is empty.
CREATE TEMPORARY FUNCTION IF NOT EXISTS HISTOGRAM_QUANTILE AS 'io.stormwatch.flink.HistogramQuantile' LANGUAGE JAVA;
