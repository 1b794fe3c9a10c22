"""How bytes enter and leave: Kafka clients, Flink Kafka table options and topics (kafka.py); OTLP JSON
and its two encodings on Kafka, otlp_json and otlp_proto (otlp.py); trace files in OTLP, Zipkin and
Jaeger JSON read as OTLP requests (trace_formats.py). The JVM side of the OTLP decoding, the `otlp`
format, is in java/ (a Maven module built by jvm/pom.xml). Nothing here imports stormwatch/, which
builds on it."""
