"""How the span chain's throughput grows with the shape of the traffic: services, instances per service
and spans per trace, each varied from one base shape while the others stay put.

Every shape is a synthetic call tree (`shaped_topology`): service i calls services 2i+1 and 2i+2, so
every trace visits every service, and each service does `stages` INTERNAL steps. A trace then has
services SERVER spans, services - 1 CLIENT spans and services x stages INTERNAL spans. Each shape runs
as the old whole-run throughput benchmark did: the same spans through Flink's raw Kafka -> Kafka
passthrough (bench/passthrough.py) and through the span path (`spans`), bounded, each job its own
process on the benchmark's broker. Start-up is measured once, on a tiny input of the base shape, and
subtracted from every run: wall-time figures, rougher than bench/throughput.py's steady-state rates.

    .venv/bin/python bench/growth.py [--spans 100000] [--out bench/results/growth.md]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)
from throughput import BENCH_CONFIG, SEED, TRACE_RATE, messages_of  # noqa: E402

from connectors.kafka import create_topics  # noqa: E402
from stormwatch.config import Config, load  # noqa: E402
from stormwatch.replay import produce  # noqa: E402
from stormwatch.runtime.kafka_broker import KafkaBroker  # noqa: E402
from stormwatch.traffic.generator import Call, Instance, Service, Stage, Topology  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "growth.md"
# Enough to pay every job's fixed cost (JVM, mini-cluster, Kafka metadata) and almost no work.
TINY_SPANS = 1000
CHAIN_ROLES = ("source", "sink", "dead_letters", "edges", "service_windows", "error_breaks", "latency_stages",
               "span_instances", "suspects", "topology_snapshots", "edge_events")


def timed(command: list[str], log: Path) -> float:
    """Wall time of `command` from its start to its exit; its output goes to `log`."""
    start = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - start
    if code != 0:
        raise SystemExit(f"{' '.join(command)} exited with {code}; see {log}")
    return elapsed


class Run:
    """One input on its own topics, through the passthrough and through the span path, each bounded."""

    def __init__(self, config: Config, label: str, messages: list[bytes], logs: Path) -> None:
        self.config, self.label, self.logs = config, label, logs
        suffix = f"{label}_{uuid.uuid4().hex[:8]}"
        self.names = {role: f"bench_{role}_{suffix}" for role in CHAIN_ROLES}
        self.passthrough_sink = f"bench_passthrough_{suffix}"
        create_topics(config, {n: {"partitions": 2} for n in [*self.names.values(), self.passthrough_sink]})
        # No partition given: the producer spreads the messages over both partitions of the input.
        sent = produce(config, self.names["source"], messages)
        if sent != len(messages):
            raise SystemExit(f"{label}: {sent} of {len(messages)} input messages delivered")

    def passthrough(self) -> float:
        return timed([sys.executable, str(ROOT / "bench" / "passthrough.py"), "--config", str(self.config.path),
                      "--bounded", self.names["source"], self.passthrough_sink, f"passthrough-{self.passthrough_sink}"],
                     self.logs / f"{self.label}-passthrough.log")

    def job(self, job: str) -> float:
        topics = [f"--topic={role}={name}" for role, name in self.names.items()]
        return timed([sys.executable, "-m", "stormwatch.cli", "--config", str(self.config.path), "run", job, "--",
                      "--bounded", "--group-id", f"{job}-{self.names['source']}", *topics],
                     self.logs / f"{self.label}-{job}.log")

    def measure(self) -> dict[str, float]:
        return {"passthrough": self.passthrough(), "chain": self.job("spans")}


@dataclass(frozen=True)
class Shape:
    services: int
    instances: int
    stages: int

    @property
    def spans_per_trace(self) -> int:
        return self.services + (self.services - 1) + self.services * self.stages

    @property
    def label(self) -> str:
        return f"s{self.services}i{self.instances}t{self.stages}"


BASE = Shape(services=5, instances=3, stages=1)
# Each dimension from the base up by about an order of magnitude, the others at the base.
SHAPES = {
    "services": [BASE, Shape(20, BASE.instances, BASE.stages), Shape(60, BASE.instances, BASE.stages)],
    "instances per service": [BASE, Shape(BASE.services, 12, BASE.stages), Shape(BASE.services, 48, BASE.stages)],
    "spans per trace": [BASE, Shape(BASE.services, BASE.instances, 5), Shape(BASE.services, BASE.instances, 15)],
}


def shaped_topology(shape: Shape) -> Topology:
    """A binary call tree of `shape.services` HTTP services on `shape.instances` instances each."""
    services = []
    for i in range(shape.services):
        calls = tuple(Call(f"svc-{c:03d}") for c in (2 * i + 1, 2 * i + 2) if c < shape.services)
        stages = tuple(Stage(f"step-{k}", 1.0) for k in range(shape.stages))
        services.append(Service(f"svc-{i:03d}", f"POST /svc-{i:03d}", "http", base_ms=2.0,
                                instances=tuple(Instance(2.0) for _ in range(shape.instances)),
                                steps=stages + calls))
    return Topology(root="svc-000", services=tuple(services))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=100_000, help="spans per shape (whole traces, so a few more)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--config", type=Path, default=BENCH_CONFIG)
    args = parser.parse_args(argv)
    config = load(args.config)
    command = "cd /work/main && .venv/bin/python bench/growth.py" + "".join(f" {a}" for a in argv)

    broker = KafkaBroker(config)
    started = broker.pid() is None
    print(broker.start(), flush=True)
    measured: dict[Shape, tuple[int, dict[str, float]]] = {}
    try:
        logs = config.runtime_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        tiny_messages, _ = messages_of(TINY_SPANS, shaped_topology(BASE))
        tiny = Run(config, "growth-tiny", tiny_messages, logs).measure()
        print(f"start-up (tiny input): {tiny}", flush=True)
        for shape in dict.fromkeys(s for shapes in SHAPES.values() for s in shapes):
            messages, n_spans = messages_of(args.spans, shaped_topology(shape))
            times = Run(config, f"growth-{shape.label}", messages, logs).measure()
            print(f"{shape}: {n_spans} spans, {times}", flush=True)
            measured[shape] = (n_spans, times)
    finally:
        if started:
            print(broker.stop(), flush=True)
    results_file.write(args.out, report(config, command, tiny, measured))


def report(config, command: str, tiny: dict[str, float], measured) -> list[str]:
    def rate(n_spans: int, seconds: float) -> str:
        return f"{n_spans / seconds:,.0f}" if seconds > 0 else "n/a"

    lines = results_file.heading("Span chain throughput against the shape of the traffic", command) + [
        f"- Flink: embedded mini-cluster per job, parallelism {config.get('flink', 'parallelism')}; "
        f"Kafka: the benchmark's broker ({config.bootstrap_servers}), topics of 2 partitions",
        f"- Input per shape: generated traces (seed {SEED}, {TRACE_RATE:g} traces/s of event time) of a binary call "
        "tree of HTTP services, every trace visiting every service; spans sorted by end time, at most 256 a message",
        f"- Start-up subtracted: passthrough {tiny['passthrough']:.1f} s, spans {tiny['chain']:.1f} s "
        f"(the same jobs on {TINY_SPANS:,} spans of the base shape)",
        "",
        "spans/s = input spans / (wall time − start-up). The chain is the span path, one job (`spans`); the "
        "ratio is its throughput over the passthrough's.",
        "",
    ]
    for dimension, shapes in SHAPES.items():
        lines += [f"## Growth with {dimension}", "",
                  "| services | instances each | spans per trace | spans | passthrough spans/s "
                  "| spans (the span path) spans/s | chain / passthrough |",
                  "|---|---|---|---|---|---|---|"]
        for shape in shapes:
            n, t = measured[shape]
            fixed = {k: t[k] - tiny[k] for k in t}
            ratio = f"{fixed['passthrough'] / fixed['chain']:.3f}" if min(fixed.values()) > 0 else "n/a"
            lines.append(f"| {shape.services} | {shape.instances} | {shape.spans_per_trace} | {n:,} "
                         f"| {rate(n, fixed['passthrough'])} | {rate(n, fixed['chain'])} | {ratio} |")
        lines.append("")
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
