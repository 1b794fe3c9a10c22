"""The functions the SQL calls, Python side: `cumulative_buckets` (histograms.py), which the health job
registers for its metrics views and which runs once per metrics record, in thread mode. The Java
functions and operators (MERGE_HISTOGRAMS, HISTOGRAM_QUANTILE, …, the trace assembler) are in
jvm/functions, one jar in every job's pipeline.jars: per-span work stays on the JVM."""
