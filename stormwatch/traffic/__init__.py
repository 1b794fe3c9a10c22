"""Synthetic OTLP trace traffic: seeded, reproducible, shaped like the OpenTelemetry Collector's output.

topology.py is the call graph (services, instances, externals), faults.py what changes it over a run
(error rates, retries, fault windows, the load curve), generator.py draws the traces, otlp.py writes
them as OTLP requests, metrics.py the instances' own metrics; schedule.py reads a fault schedule file,
stream.py and send.py pace the output onto Kafka. Plain Python with no Flink or Kafka import below
send.py, so demos, benchmarks and tests can make spans anywhere.
"""

# The instrumentation scope everything generated (spans and metrics) is reported under.
SCOPE = {"name": "stormwatch.traffic"}
