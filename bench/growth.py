"""How the span chain's throughput grows with the shape of the traffic: services, instances per service
and spans per trace, each varied from one base shape while the others stay put.

Every shape is a synthetic call tree (`shaped_topology`): service i calls services 2i+1 and 2i+2, so
every trace visits every service, and each service does `stages` INTERNAL steps. A trace then has
services SERVER spans, services - 1 CLIENT spans and services x stages INTERNAL spans. Per shape, the
same spans go through Flink's raw Kafka -> Kafka passthrough and through flatten_spans then topology,
bounded, each job its own process (embedded mini-cluster) on the benchmark's broker.

Method (nothing is subtracted, no start-up time is assumed):
- Input first: the messages are produced to a fresh topic, every delivery checked (failed ones sent
  again), and read back (read_committed) before anything is timed; the run stops unless the topic
  holds exactly the messages sent (every value's SHA-256, counted), so a lost or doubled delivery is
  never timed as work.
- Steady-state rates: while a job runs, its progress is sampled every SAMPLE_S seconds, and its rate is
  the spans done between the first samples at STEADY_FROM and STEADY_TO of its input over the time
  between them: the JVM, mini-cluster and job start-up come before, the end-of-input flush after.
  Progress is what the job has written to its sink for the passthrough (messages, as spans) and
  flatten_spans (one record a span), read as the sink's end offsets without waiting for the
  checkpoint to commit them (read_uncommitted; a few transaction markers a checkpoint count too), and
  for topology, which aggregates, the spans it has consumed: its consumer group's committed offsets on
  stormwatch_spans (advanced at every checkpoint), mapped to spans record by record. A job that takes
  fewer than MIN_STEPS steps of progress between the two samples did too little work for a rate: n/a.
- The passthrough copies bytes an order of magnitude faster than the chain parses them, so it reads
  the shape's messages copied --passthrough-copies times (the same verification applies).
- Outputs counted after each job, as committed records (read_committed, consumed one by one): the
  passthrough's sink must hold every message it read and flatten_spans' every span, or the run stops.

    .venv/bin/python bench/growth.py [--spans 100000] [--passthrough-copies 20] [--shapes s5i3t1,...]
                                     [--out bench/results/growth.md]
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script from anywhere: stormwatch/ and connectors/ are packages at the project root.
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from kafka import TopicPartition  # noqa: E402
from kafka.errors import KafkaError  # noqa: E402

from connectors.kafka import admin, consumer, create_topics, producer, table_options  # noqa: E402
from stormwatch.config import Config, load  # noqa: E402
from stormwatch.runtime.kafka_broker import KafkaBroker  # noqa: E402
from stormwatch.traffic.generator import (  # noqa: E402
    Call,
    Instance,
    Service,
    Stage,
    Topology,
    TraceGenerator,
    to_export_requests,
)
from stormwatch.traffic.otlp import encode  # noqa: E402

BENCH_CONFIG = ROOT / "bench" / "stormwatch-bench.toml"
DEFAULT_OUT = ROOT / "bench" / "results" / "growth.md"
SEED = 42
TRACE_RATE = 100.0          # traces per second of event time
SAMPLE_S = 0.25
STEADY_FROM, STEADY_TO = 0.2, 0.8
MIN_STEPS = 4
CHAIN_ROLES = ("source", "sink", "dead_letters", "edges", "service_windows", "error_breaks", "latency_stages")
JOBS = ("passthrough", "flatten_spans", "topology")


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


def messages_of(spans_wanted: int, topology: Topology) -> tuple[list[bytes], list[int]]:
    """At least `spans_wanted` spans in whole traces, as Collector messages; (messages, spans in each)."""
    spans = []
    for trace in TraceGenerator(seed=SEED, topology=topology).generate(TRACE_RATE):
        spans.extend(trace)
        if len(spans) >= spans_wanted:
            break
    spans.sort(key=lambda s: s.end_unix_nano)
    requests = list(to_export_requests(spans))
    counts = [sum(len(ss.get("spans", [])) for rs in r.get("resourceSpans", []) for ss in rs.get("scopeSpans", []))
              for r in requests]
    assert sum(counts) == len(spans)
    return [encode(r) for r in requests], counts


# ---------------------------------------------------------------------------------------------
# Kafka: reading back, counting, progress.

def _partitions(client, topic: str) -> list[TopicPartition]:
    for _ in range(50):
        found = client.partitions_for_topic(topic)
        if found:
            return [TopicPartition(topic, p) for p in sorted(found)]
        time.sleep(0.2)
    raise SystemExit(f"topic {topic} has no partitions")


def read_back(config: Config, topic: str, timeout_s: float = 600.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every committed record of `topic`: {partition: [(offset, SHA-256 of the value)]}."""
    client = consumer(config, isolation_level="read_committed", enable_auto_commit=False)
    try:
        parts = _partitions(client, topic)
        client.assign(parts)
        client.seek_to_beginning(*parts)
        end = client.end_offsets(parts)
        out: dict[int, list[tuple[int, bytes]]] = {tp.partition: [] for tp in parts}
        deadline = time.monotonic() + timeout_s
        while any(client.position(tp) < end[tp] for tp in parts):
            if time.monotonic() > deadline:
                raise SystemExit(f"reading {topic} back: not at its end after {timeout_s:.0f} s")
            for tp, records in client.poll(timeout_ms=1000).items():
                out[tp.partition].extend((r.offset, hashlib.sha256(r.value).digest()) for r in records)
        return out
    finally:
        client.close()


def send_checked(config: Config, topic: str, messages: list[bytes], rounds: int = 3) -> None:
    """Send every message, checking each delivery; what failed is sent again (up to `rounds` times). A
    failure reported for a message that did land shows up as a duplicate in the read-back below."""
    client = producer(config)
    try:
        pending = messages
        for _ in range(rounds):
            # No partition given: the producer spreads the messages over both partitions.
            futures = [(m, client.send(topic, m)) for m in pending]
            client.flush()
            failed = []
            for m, future in futures:
                try:
                    future.get(timeout=120)
                except KafkaError as e:
                    failed.append((m, e))
            if not failed:
                return
            print(f"{topic}: {len(failed)} of {len(pending)} deliveries failed ({failed[0][1]!r}); sending them again",
                  flush=True)
            pending = [m for m, _ in failed]
        raise SystemExit(f"{topic}: {len(pending)} messages not delivered after {rounds} rounds")
    finally:
        client.close()


def produce_verified(config: Config, topic: str, messages: list[bytes], copies: int = 1) -> dict[int, list[tuple[int, bytes]]]:
    """Produce `copies` times `messages` to a fresh `topic`, then check it holds exactly those."""
    create_topics(config, {topic: {"partitions": 2}})
    send_checked(config, topic, [m for _ in range(copies) for m in messages])
    held = read_back(config, topic)
    sent = Counter({hashlib.sha256(m).digest(): 0 for m in messages})
    for m in messages:
        sent[hashlib.sha256(m).digest()] += copies
    got = Counter(digest for records in held.values() for _, digest in records)
    if got != sent:
        missing, extra = sum((sent - got).values()), sum((got - sent).values())
        raise SystemExit(f"{topic}: holds {sum(got.values())} records, {len(messages) * copies} sent "
                         f"({missing} missing, {extra} not sent): not timing a wrong input")
    return held


def committed_records(config: Config, topic: str) -> int:
    return sum(len(records) for records in read_back(config, topic).values())


def written(config: Config, topic: str) -> Callable[[], int]:
    """Records written to `topic` so far, committed or not (end offsets, read_uncommitted)."""
    client = consumer(config, isolation_level="read_uncommitted", enable_auto_commit=False)
    parts = _partitions(client, topic)

    def sample() -> int:
        return sum(client.end_offsets(parts).values())

    sample.close = client.close  # type: ignore[attr-defined]
    return sample


def consumed(config: Config, group: str, topic: str, held: dict[int, list[tuple[int, bytes]]]) -> Callable[[], int]:
    """Records of `topic` before `group`'s committed offsets (records, not offsets: markers skipped)."""
    client = admin(config)
    offsets = {p: [o for o, _ in records] for p, records in held.items()}

    def sample() -> int:
        try:
            committed = client.list_consumer_group_offsets(group)
        except Exception:  # the group appears with the first commit
            return 0
        return sum(bisect.bisect_left(offsets.get(tp.partition, []), meta.offset)
                   for tp, meta in committed.items() if tp.topic == topic and meta.offset >= 0)

    sample.close = client.close  # type: ignore[attr-defined]
    return sample


# ---------------------------------------------------------------------------------------------
# Jobs and their rates.

@dataclass
class Measured:
    spans: int              # the job's input, in spans
    wall_s: float
    rate: float | None      # steady-state spans/s, None when there was too little work for one
    window_s: float         # the time between the STEADY_FROM and STEADY_TO samples
    steps: int              # progress steps in it

    def text(self) -> str:
        return f"{self.rate:,.0f}" if self.rate else f"n/a ({self.steps} steps)"


def steady_rate(samples: list[tuple[float, int]], total: int) -> tuple[float | None, float, int]:
    """(spans/s between the first samples at STEADY_FROM and STEADY_TO of `total`, seconds, steps)."""
    first = next(((t, p) for t, p in samples if p >= STEADY_FROM * total), None)
    last = next(((t, p) for t, p in samples if p >= STEADY_TO * total), None)
    if first is None or last is None or last[0] <= first[0]:
        return None, 0.0, 0
    steps = len({p for t, p in samples if first[0] <= t <= last[0]}) - 1
    seconds = last[0] - first[0]
    return ((last[1] - first[1]) / seconds if steps >= MIN_STEPS else None), seconds, steps


def run_sampled(command: list[str], log: Path, progress: Callable[[], int], per_record: float, total: int) -> Measured:
    """Run `command` to its exit, sampling `progress` (records) meanwhile; progress x per_record = spans."""
    samples: list[tuple[float, int]] = []
    start = time.monotonic()
    try:
        with log.open("w") as out:
            process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            while process.poll() is None:
                samples.append((time.monotonic(), round(progress() * per_record)))
                time.sleep(SAMPLE_S)
        wall = time.monotonic() - start
        samples.append((time.monotonic(), round(progress() * per_record)))
    finally:
        progress.close()  # type: ignore[attr-defined]
    if process.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} exited with {process.returncode}; see {log}")
    rate, seconds, steps = steady_rate(samples, total)
    return Measured(total, wall, rate, seconds, steps)


def passthrough(config: Config, source: str, sink: str, group: str) -> None:
    """Flink SQL copy of the raw values of `source` to `sink`, bounded; runs in this process, with the
    jobs' configuration and delivery guarantee (checkpoints, transactions)."""
    from jobs.common import Inserts
    from stormwatch.flink_env import table_environment

    t_env = table_environment(config, "bench-passthrough")
    reading = {"properties.group.id": group, "scan.startup.mode": "earliest-offset",
               "scan.bounded.mode": "latest-offset", "format": "raw"}
    t_env.execute_sql(f"CREATE TEMPORARY TABLE src (`payload` BYTES) WITH ({table_options(config, source, **reading)})")
    t_env.execute_sql(f"CREATE TEMPORARY TABLE dst (`payload` BYTES) WITH ({table_options(config, sink, format='raw')})")
    inserts = Inserts(t_env, config, group)
    inserts.sql("INSERT INTO dst SELECT `payload` FROM src")
    inserts.execute(bounded=True)


def measure_shape(config: Config, shape: Shape, spans_wanted: int, copies: int, logs: Path) -> dict:
    messages, counts = messages_of(spans_wanted, shaped_topology(shape))
    n_spans = sum(counts)
    suffix = f"{shape.label}_{uuid.uuid4().hex[:8]}"
    names = {role: f"bench_{role}_{suffix}" for role in CHAIN_ROLES}
    create_topics(config, {n: {"partitions": 2} for role, n in names.items() if role != "source"})
    produce_verified(config, names["source"], messages)
    print(f"{shape.label}: input verified, {len(messages)} messages, {n_spans} spans", flush=True)
    out: dict = {"spans": n_spans, "messages": len(messages)}

    # Passthrough, on its own copies of the messages.
    pass_source, pass_sink = f"bench_passthrough_in_{suffix}", f"bench_passthrough_out_{suffix}"
    produce_verified(config, pass_source, messages, copies)
    create_topics(config, {pass_sink: {"partitions": 2}})
    group = f"passthrough-{pass_sink}"
    out["passthrough"] = run_sampled(
        [sys.executable, __file__, "--config", str(config.path), "--passthrough", pass_source, pass_sink, group],
        logs / f"growth-{shape.label}-passthrough.log", written(config, pass_sink), n_spans / len(messages),
        n_spans * copies)
    got = committed_records(config, pass_sink)
    if got != len(messages) * copies:
        raise SystemExit(f"passthrough of {shape.label}: {got} records committed, {len(messages) * copies} read")
    out["passthrough_committed"] = got

    def job_command(job: str) -> list[str]:
        topics = [f"--topic={role}={name}" for role, name in names.items()]
        return [sys.executable, "-m", "stormwatch.cli", "--config", str(config.path), "run", job, "--",
                "--bounded", "--group-id", f"{job}-{names['source']}", *topics]

    out["flatten_spans"] = run_sampled(job_command("flatten_spans"), logs / f"growth-{shape.label}-flatten_spans.log",
                                       written(config, names["sink"]), 1.0, n_spans)
    spans_held = read_back(config, names["sink"])
    got = sum(len(r) for r in spans_held.values())
    if got != n_spans:
        raise SystemExit(f"flatten_spans of {shape.label}: {got} spans committed, {n_spans} sent")
    out["flatten_committed"] = got
    out["topology"] = run_sampled(job_command("topology"), logs / f"growth-{shape.label}-topology.log",
                                  consumed(config, f"topology-{names['source']}", names["sink"], spans_held), 1.0,
                                  n_spans)
    out["topology_committed"] = {role: committed_records(config, names[role])
                                 for role in ("edges", "service_windows", "error_breaks", "latency_stages")}
    print(f"{shape.label}: {out}", flush=True)
    return out


# ---------------------------------------------------------------------------------------------

def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=100_000, help="spans per shape (whole traces, so a few more)")
    parser.add_argument("--passthrough-copies", type=int, default=20,
                        help="the passthrough reads the shape's messages this many times over")
    parser.add_argument("--shapes", help="comma-separated shape labels (e.g. s5i3t1) to run; default all")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--config", type=Path, default=BENCH_CONFIG)
    # Internal: the passthrough job, run by the benchmark in a process of its own like the chain's jobs.
    parser.add_argument("--passthrough", nargs=3, metavar=("SOURCE", "SINK", "GROUP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    config = load(args.config)
    if args.passthrough:
        passthrough(config, *args.passthrough)
        return
    # The command as run, so that the results file says how to get them again.
    command = f"cd {shlex.quote(os.getcwd())} && {shlex.join([os.path.relpath(sys.executable), sys.argv[0], *argv])}"

    shapes = list(dict.fromkeys(s for shapes in SHAPES.values() for s in shapes))
    if args.shapes:
        wanted = set(args.shapes.split(","))
        shapes = [s for s in shapes if s.label in wanted]
    broker = KafkaBroker(config)
    started = broker.pid() is None
    print(broker.start(), flush=True)
    measured: dict[Shape, dict] = {}
    try:
        logs = config.runtime_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for shape in shapes:
            measured[shape] = measure_shape(config, shape, args.spans, args.passthrough_copies, logs)
    finally:
        if started:
            print(broker.stop(), flush=True)
    results_file.write(args.out, report(config, command, args.passthrough_copies, measured))


def report(config: Config, command: str, copies: int, measured: dict[Shape, dict]) -> list[str]:
    lines = results_file.heading("Span chain throughput against the shape of the traffic", command) + [
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average at the end "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        f"- Flink: embedded mini-cluster per job, parallelism {config.get('flink', 'parallelism')}; "
        f"Kafka: the benchmark's broker ({config.bootstrap_servers}), topics of 2 partitions",
        f"- Input per shape: generated traces (seed {SEED}, {TRACE_RATE:g} traces/s of event time) of a binary call "
        "tree of HTTP services, every trace visiting every service; spans sorted by end time, at most 256 a "
        f"message; read back and checked equal to what was sent before any job ran. The passthrough reads "
        f"{copies} copies of it.",
        "",
        f"spans/s is the steady-state rate: spans done between the samples at {STEADY_FROM:.0%} and {STEADY_TO:.0%} "
        "of the job's input, over the time between them (progress sampled every "
        f"{SAMPLE_S:g} s: the passthrough's and flatten_spans' records written to their sinks, topology's committed "
        "input offsets). No start-up time is subtracted; n/a: fewer than "
        f"{MIN_STEPS} steps of progress in that span, too little work for a rate. The chain is flatten_spans "
        "then topology one after the other: 1 / (1/flatten + 1/topology). The ratio is chain over passthrough.",
        "",
    ]

    def rate(m: Measured) -> str:
        return m.text()

    for dimension, shapes in SHAPES.items():
        rows = [s for s in shapes if s in measured]
        if not rows:
            continue
        lines += [f"## Growth with {dimension}", "",
                  "| services | instances each | spans per trace | spans | passthrough spans/s | flatten_spans spans/s "
                  "| topology spans/s | chain spans/s | chain / passthrough |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for shape in rows:
            m = measured[shape]
            p, f, t = m["passthrough"], m["flatten_spans"], m["topology"]
            chain = 1 / (1 / f.rate + 1 / t.rate) if f.rate and t.rate else None
            ratio = f"{chain / p.rate:.3f}" if chain and p.rate else "n/a"
            lines.append(f"| {shape.services} | {shape.instances} | {shape.spans_per_trace} | {m['spans']:,} "
                         f"| {rate(p)} | {rate(f)} | {rate(t)} | {f'{chain:,.0f}' if chain else 'n/a'} | {ratio} |")
        lines.append("")
    lines += ["## Per run", "",
              "| shape | job | input spans | wall s | measured over s | progress steps | committed output records |",
              "|---|---|---|---|---|---|---|"]
    for shape, m in measured.items():
        outputs = {"passthrough": f"{m['passthrough_committed']:,} messages",
                   "flatten_spans": f"{m['flatten_committed']:,} spans",
                   "topology": ", ".join(f"{k} {v:,}" for k, v in m["topology_committed"].items())}
        for job in JOBS:
            j: Measured = m[job]
            lines.append(f"| {shape.label} | {job} | {j.spans:,} | {j.wall_s:.1f} | {j.window_s:.1f} | {j.steps} "
                         f"| {outputs[job]} |")
    lines.append("")
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
