"""How stormwatch talks to Kafka: client settings, Flink table options, topics."""
