"""Synthetic OTLP trace traffic: seeded, reproducible, shaped like the OpenTelemetry Collector's output.

Plain Python with no Flink or Kafka import, so demos, benchmarks and tests can make spans anywhere.
"""

# The instrumentation scope everything generated (spans and metrics) is reported under.
SCOPE = {"name": "stormwatch.traffic"}
