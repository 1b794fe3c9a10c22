"""stormwatch: streaming analytics on Apache Flink for service chains.

Spans and metrics come from Kafka, Flink SQL does the per-span work on the JVM, and plain Python
modules here hold the pure logic that sees only per-window aggregates.
"""

__version__ = "0.1.0"
