"""How the span path's throughput grows with the shape of the traffic: services, instances per service
and spans per trace, each varied from one base shape while the others stay put.

Every shape is a synthetic call tree (`shaped_topology`): service i calls services 2i+1 and 2i+2, so
every trace visits every service, and each service does `stages` INTERNAL steps. A trace then has
services SERVER spans, services - 1 CLIENT spans and services x stages INTERNAL spans. Each shape is
measured as bench/throughput.py measures (its functions, not a copy): the input streamed to a fresh
2-partition topic and verified, then Flink's raw Kafka -> Kafka passthrough (bench/passthrough.py) and
the span path (`spans`) live on the benchmark's standalone cluster, one after the other, each rate
sampled from the sources' Kafka offsets over 20-80 % of the input (no start-up estimate subtracted).
A window under 20 s is flagged: give more --spans.

    .venv/bin/python bench/growth.py [--spans 2000000] [--out bench/results/growth.md]
"""

from __future__ import annotations

import argparse
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)
from throughput import (BENCH_CONFIG, MIN_WINDOW_S, OUTPUT_ROLES, PARTITIONS, SEED, TRACE_RATE, Run,  # noqa: E402
                        request_chunks, run_live, services, spans_in, write_input)

from connectors.kafka import create_topics, delete_topics  # noqa: E402
from connectors.otlp import encoder, write_encoding  # noqa: E402
from stormwatch import job_registry  # noqa: E402
from stormwatch.config import Config, load  # noqa: E402
from stormwatch.runtime.flink_cluster import FlinkCluster  # noqa: E402
from stormwatch.traffic.topology import Call, Instance, Service, Stage, Topology  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "growth.md"


def measure(config: Config, cluster: FlinkCluster, shape: "Shape", spans_wanted: int) -> tuple[int, Run, Run]:
    """(spans in the input, the passthrough's run, the span path's run) on one shape's own topics,
    which are deleted after."""
    encode_request = encoder(config.get("pipeline", "spans", "encoding"))
    chunks = (([encode_request(r) for r in requests], [spans_in(r) for r in requests])
              for requests in request_chunks(spans_wanted, shaped_topology(shape)))
    suffix = f"{shape.label}_{uuid.uuid4().hex[:8]}"
    data = write_input(config, f"bench_source_{suffix}", chunks)
    outputs = {role: f"bench_{role}_{suffix}" for role in OUTPUT_ROLES}
    passthrough_sink = f"bench_passthrough_{suffix}"
    create_topics(config, {t: {"partitions": PARTITIONS} for t in [passthrough_sink, *outputs.values()]})
    try:
        timeout_s = 600 + data.spans / 1000
        job_id = cluster.submit(ROOT / "bench" / "passthrough.py", ["--config", str(config.path), data.topic,
                                                                     passthrough_sink, f"bench-passthrough-{suffix}"])
        passthrough = run_live(config, cluster, "passthrough", job_id, data, timeout_s)
        job_id = cluster.submit(job_registry.path("spans"), [
            "--config", str(config.path), "--from-earliest", "--group-id", f"bench-spans-{suffix}",
            f"--topic=source={data.topic}", *(f"--topic={role}={name}" for role, name in outputs.items())])
        chain = run_live(config, cluster, "spans", job_id, data, timeout_s)
    finally:
        delete_topics(config, {data.topic, passthrough_sink, *outputs.values()})
    return data.spans, passthrough, chain


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
    parser.add_argument("--spans", type=int, default=2_000_000, help="spans per shape (whole traces, so a few more)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--config", type=Path, default=BENCH_CONFIG)
    args = parser.parse_args(argv)
    config = load(args.config)
    command = results_file.command(__file__, argv)
    measured: dict[Shape, tuple[int, Run, Run]] = {}
    with services(config) as cluster:
        for shape in dict.fromkeys(s for shapes in SHAPES.values() for s in shapes):
            measured[shape] = measure(config, cluster, shape, args.spans)
            n, passthrough, chain = measured[shape]
            print(f"{shape}: {n:,} spans, passthrough {passthrough.window}, spans {chain.window}", flush=True)
    results_file.write(args.out, report(config, command, measured))


def report(config, command: str, measured) -> list[str]:
    def rate(run: Run) -> str:
        if run.window is None:
            return "n/a"
        short = " (short)" if run.window.seconds < MIN_WINDOW_S else ""
        return f"{run.window.rate:,.0f}{short}"

    lines = results_file.heading("Span path throughput against the shape of the traffic", command) + [
        f"- Flink: the benchmark's standalone cluster, parallelism {config.get('flink', 'parallelism')}, live sources, "
        f"delivery {config.get('pipeline', 'delivery', 'guarantee')}; Kafka: the benchmark's broker "
        f"({config.bootstrap_servers}), topics of {PARTITIONS} partitions",
        f"- Input per shape: generated traces (seed {SEED}, {TRACE_RATE:g} traces/s of event time) of a binary call "
        "tree of HTTP services, every trace visiting every service; spans sorted by end time, at most 256 a message, "
        f"in {write_encoding(config.get('pipeline', 'spans', 'encoding'))}; verified on the topic before timing",
        "",
        "spans/s: steady state, from the sources' Kafka offsets between 20 % and 80 % of the input read "
        f"(as bench/throughput.py); *(short)*: under {MIN_WINDOW_S:g} s in that window, too little work for a "
        "firm figure. The ratio is the span path's rate over the passthrough's.",
        "",
    ]
    for dimension, shapes in SHAPES.items():
        lines += [f"## Growth with {dimension}", "",
                  "| services | instances each | spans per trace | spans | passthrough spans/s "
                  "| spans (the span path) spans/s | span path / passthrough |",
                  "|---|---|---|---|---|---|---|"]
        for shape in shapes:
            n, passthrough, chain = measured[shape]
            ratio = (f"{chain.window.rate / passthrough.window.rate:.2f}"
                     if chain.window and passthrough.window else "n/a")
            lines.append(f"| {shape.services} | {shape.instances} | {shape.spans_per_trace} | {n:,} "
                         f"| {rate(passthrough)} | {rate(chain)} | {ratio} |")
        lines.append("")
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
