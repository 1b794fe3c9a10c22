"""stormwatch: streaming analytics on Apache Flink for service chains.

Spans and metrics come from Kafka; the per-span work runs on the JVM (the `otlp` format, the trace
assembler, Flink SQL). The plain Python modules here are the product's logic, which sees per-window
aggregates (and, offline, whole traces: the backtest), and around it the CLI, the local runtime and
the traffic generator; jobs/ wires them into Flink.
"""

__version__ = "0.1.0"
