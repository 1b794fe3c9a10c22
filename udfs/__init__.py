"""The functions the SQL calls, Python side: `cumulative_buckets` (histograms.py), which the health job
registers for its metrics views and which runs once per metrics record, in thread mode. The Java
functions (OTLP_JSON_ERROR, MERGE_HISTOGRAMS, HISTOGRAM_QUANTILE) are in java/, a Maven module built by
jvm/pom.xml into a jar every job ships in pipeline.jars; the trace assembler, the span path's keyed operator, is
in udfs/traces/: per-span work stays on the JVM."""
