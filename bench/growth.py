"""How the span chain's throughput grows with the shape of the traffic: services, instances per service
and spans per trace, each varied from one base shape while the others stay put.

Every shape is a synthetic call tree (`shaped_topology`): service i calls services 2i+1 and 2i+2, so
every trace visits every service, and each service does `stages` INTERNAL steps. A trace then has
services SERVER spans, services - 1 CLIENT spans and services x stages INTERNAL spans. Each shape runs
like bench/topology_throughput.py: the same spans through Flink's raw Kafka -> Kafka passthrough and
through flatten_spans then topology, bounded, each job its own process on the benchmark's broker.
Start-up is measured once, on a tiny input of the base shape, and subtracted from every run.

    .venv/bin/python bench/growth.py [--spans 100000] [--out bench/results/growth.md]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)
from topology_throughput import BENCH_CONFIG, SEED, TINY_SPANS, TRACE_RATE, Run, messages_of  # noqa: E402

from connectors.kafka import committed_records  # noqa: E402
from stormwatch.config import load  # noqa: E402
from stormwatch.runtime.kafka_broker import KafkaBroker  # noqa: E402
from stormwatch.traffic.generator import Call, Instance, Service, Stage, Topology  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "growth.md"


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
        tiny = verified(Run(config, "growth-tiny", tiny_messages, logs), tiny_messages).measure()
        print(f"start-up (tiny input): {tiny}", flush=True)
        for shape in dict.fromkeys(s for shapes in SHAPES.values() for s in shapes):
            messages, n_spans = messages_of(args.spans, shaped_topology(shape))
            times = verified(Run(config, f"growth-{shape.label}", messages, logs), messages).measure()
            print(f"{shape}: {n_spans} spans, {times}", flush=True)
            measured[shape] = (n_spans, times)
    finally:
        if started:
            print(broker.stop(), flush=True)
    results_file.write(args.out, report(config, command, tiny, measured))


def verified(run: Run, messages: list[bytes]) -> Run:
    """The run, once its input topic holds exactly the messages produced: nothing is timed on less."""
    held = committed_records(run.config, run.names["source"])
    if held != len(messages):
        raise SystemExit(f"{run.names['source']} holds {held:,} records, not the {len(messages):,} produced")
    return run


def report(config, command: str, tiny: dict[str, float], measured) -> list[str]:
    def rate(n_spans: int, seconds: float) -> str:
        return f"{n_spans / seconds:,.0f}" if seconds > 0 else "n/a"

    lines = results_file.heading("Span chain throughput against the shape of the traffic", command) + [
        f"- Flink: embedded mini-cluster per job, parallelism {config.get('flink', 'parallelism')}; "
        f"Kafka: the benchmark's broker ({config.bootstrap_servers}), topics of 2 partitions",
        f"- Input per shape: generated traces (seed {SEED}, {TRACE_RATE:g} traces/s of event time) of a binary call "
        "tree of HTTP services, every trace visiting every service; spans sorted by end time, at most 256 a message",
        "- Input verified before timing: every run's source topic held exactly the messages produced "
        "(its committed records counted, read_committed)",
        f"- Start-up subtracted: passthrough {tiny['passthrough']:.1f} s, flatten_spans {tiny['flatten_spans']:.1f} s, "
        f"topology {tiny['topology']:.1f} s (the same jobs on {TINY_SPANS:,} spans of the base shape)",
        "",
        "spans/s = input spans / (wall time − start-up). The chain is flatten_spans then topology, one after the "
        "other; the ratio is chain throughput over passthrough throughput.",
        "",
    ]
    for dimension, shapes in SHAPES.items():
        lines += [f"## Growth with {dimension}", "",
                  "| services | instances each | spans per trace | spans | passthrough spans/s | flatten_spans spans/s "
                  "| topology spans/s | chain spans/s | chain / passthrough |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for shape in shapes:
            n, t = measured[shape]
            fixed = {k: t[k] - tiny[k] for k in t}
            ratio = f"{fixed['passthrough'] / fixed['chain']:.3f}" if min(fixed.values()) > 0 else "n/a"
            lines.append(f"| {shape.services} | {shape.instances} | {shape.spans_per_trace} | {n:,} "
                         f"| {rate(n, fixed['passthrough'])} | {rate(n, fixed['flatten_spans'])} "
                         f"| {rate(n, fixed['topology'])} | {rate(n, fixed['chain'])} | {ratio} |")
        lines.append("")
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
