"""`stormwatch generate` and the demo: generated traffic (stream.outputs) onto Kafka, live or as fast
as possible.

Spans go to the source topic (otlp_spans) as ExportTraceServiceRequests; metrics to
stormwatch_instance_metrics as native records keyed by instance, or to otlp_metrics as
ExportMetricsServiceRequests. Live pace sends each message when its event time has come, so a run
started at now looks to the jobs like a deployment's exporters.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from connectors.kafka import partition_count
from connectors.otlp import encode_json, encoder
from stormwatch import catalog
from stormwatch.config import Config
from stormwatch.replay import paced, send
from stormwatch.traffic.faults import Params
from stormwatch.traffic.generator import TraceGenerator
from stormwatch.traffic.metrics import MetricsSettings
from stormwatch.traffic.schedule import Schedule
from stormwatch.traffic.stream import MetricsFormat, Output, outputs


@dataclass
class Sent:
    """What the broker acknowledged (a record that failed raises DeliveryError instead)."""

    span_messages: int = 0
    spans: int = 0
    metrics_messages: int = 0

    def line(self) -> str:
        return (f"delivered {self.spans:,} spans in {self.span_messages:,} message(s) "
                f"and {self.metrics_messages:,} metrics message(s), 0 failed")


def generator_for(config: Config, schedule: Schedule, seed: int, start_unix_nano: int,
                  with_metrics: bool = True) -> TraceGenerator:
    settings = config.section("pipeline", "generator")
    metrics = MetricsSettings(float(settings["metrics_interval_seconds"]),
                              tuple(float(b) for b in settings["latency_bucket_bounds_ms"])) if with_metrics else None
    return TraceGenerator(seed=seed, start_unix_nano=start_unix_nano, faults=schedule.faults,
                          params=Params(retries=schedule.retries), load=schedule.load, metrics=metrics)


def metrics_topic(config: Config, metrics_format: MetricsFormat) -> str:
    """The topic the health job reads metrics of this format from."""
    return catalog.topics(config)["otlp_metrics" if metrics_format == "otlp" else "metrics"]


def generate(config: Config, schedule: Schedule, rate_per_s: float, duration_s: float | None, seed: int,
             metrics_format: MetricsFormat | None = "native", live: bool = True,
             stop: threading.Event | None = None) -> Sent:
    """Generate `duration_s` (None: until `stop`) of traffic starting now and send it; live paces it to
    the wall clock, otherwise it goes as fast as the broker takes it."""
    stop = stop or threading.Event()
    settings = config.section("pipeline", "generator")
    generator = generator_for(config, schedule, seed, time.time_ns(), with_metrics=metrics_format is not None)
    topics = {"spans": catalog.topics(config)["source"],
              "metrics": metrics_topic(config, metrics_format or "native")}
    stream = outputs(generator, rate_per_s, duration_s, int(settings["export_batch_ms"]),
                     int(settings["max_spans_per_message"]), metrics_format,
                     # 1 if it does not exist yet: sending then fails naming it
                     partition_count(config, topics["spans"]) or 1)
    sent = Sent()
    # Spans in the encoding flatten_spans reads; metrics stay JSON (native or otlp_json).
    encode_spans = encoder(config.get("pipeline", "spans", "encoding"))

    def records():
        for output in paced(stream, lambda o: o.time_unix_nano, 1.0 if live else None, sleep=stop.wait):
            if stop.is_set():
                return
            yield output

    unacked: dict[int, Output] = {}  # by the record's index, until the broker acknowledged it

    def counted(index: int, output: Output) -> tuple[str, bytes | None, bytes, int | None]:
        unacked[index] = output
        key = None if output.key is None else json.dumps(output.key, sort_keys=True, separators=(",", ":")).encode()
        encode = encode_spans if output.kind == "spans" else encode_json
        return topics[output.kind], key, encode(output.value), output.partition

    def on_acked(index: int) -> None:
        output = unacked.pop(index)
        if output.kind == "spans":
            sent.span_messages += 1
            sent.spans += output.spans
        else:
            sent.metrics_messages += 1

    send(config, (counted(i, o) for i, o in enumerate(records())),
         {topics['spans']} | ({topics['metrics']} if metrics_format else set()), on_acked=on_acked)
    return sent
