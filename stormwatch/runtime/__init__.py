"""Local runtime: the Kafka broker and the standalone Flink cluster this machine runs for stormwatch."""
