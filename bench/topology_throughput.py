"""Throughput of the stormwatch chain (flatten_spans then topology) against Flink's own Kafka -> Kafka
passthrough of the same OTLP JSON messages, on this machine, in one run.

Input: generated AI-chain traces (stormwatch.traffic.generator, fixed seed), re-batched as the
Collector sends them (spans in end-time order, at most 256 per message), produced to a fresh
2-partition topic of the benchmark's own broker (bench/stormwatch-bench.toml). Every job is bounded
and runs as its own process on an embedded mini-cluster of the configured parallelism; its time is
the process's wall time, start-up included. Each job also runs once on a tiny input; subtracting
that time gives a start-up-corrected figure.

    .venv/bin/python bench/topology_throughput.py [--spans 500000] [--out bench/results/topology_throughput.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script from anywhere: stormwatch/ and connectors/ are packages at the project root.
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from kafka import TopicPartition  # noqa: E402

from connectors.kafka import consumer, create_topics, table_options  # noqa: E402
from stormwatch.config import Config, load  # noqa: E402
from stormwatch.replay import produce  # noqa: E402
from stormwatch.runtime.kafka_broker import KafkaBroker  # noqa: E402
from stormwatch.traffic.generator import DEFAULT_TOPOLOGY, Topology, TraceGenerator, to_export_requests  # noqa: E402
from stormwatch.traffic.otlp import encode  # noqa: E402

BENCH_CONFIG = ROOT / "bench" / "stormwatch-bench.toml"
DEFAULT_OUT = ROOT / "bench" / "results" / "topology_throughput.md"
SEED = 42
# Traces per second of event time: ~12 spans each, so 500k spans cover about 7 minutes of traffic,
# many 30 s / 10 s windows rather than a handful.
TRACE_RATE = 100.0
# Enough to pay every job's fixed cost (JVM, mini-cluster, Kafka metadata) and almost no work.
TINY_SPANS = 1000
# The targets.
TARGET_SPANS_PER_S = 100_000
TARGET_RATIO = 0.6
CHAIN_ROLES = ("source", "sink", "dead_letters", "edges", "service_windows", "error_breaks", "latency_stages")


def messages_of(spans_wanted: int, topology: Topology = DEFAULT_TOPOLOGY) -> tuple[list[bytes], int]:
    """At least `spans_wanted` spans in whole traces, as Collector messages; (messages, span count)."""
    spans = []
    for trace in TraceGenerator(seed=SEED, topology=topology).generate(TRACE_RATE):
        spans.extend(trace)
        if len(spans) >= spans_wanted:
            break
    spans.sort(key=lambda s: s.end_unix_nano)
    return [encode(r) for r in to_export_requests(spans)], len(spans)


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


def timed(command: list[str], log: Path) -> float:
    """Wall time of `command` from its start to its exit; its output goes to `log`."""
    start = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - start
    if code != 0:
        raise SystemExit(f"{' '.join(command)} exited with {code}; see {log}")
    return elapsed


def records_in(config: Config, topic: str) -> int:
    client = consumer(config)
    try:
        partitions = [TopicPartition(topic, p) for p in client.partitions_for_topic(topic)]
        return sum(client.end_offsets(partitions).values())
    finally:
        client.close()


class Run:
    """One input on its own topics, through the passthrough and through the chain."""

    def __init__(self, config: Config, label: str, messages: list[bytes], logs: Path) -> None:
        self.config, self.label, self.logs = config, label, logs
        suffix = f"{label}_{uuid.uuid4().hex[:8]}"
        self.names = {role: f"bench_{role}_{suffix}" for role in CHAIN_ROLES}
        self.passthrough_sink = f"bench_passthrough_{suffix}"
        create_topics(config, {n: {"partitions": 2} for n in [*self.names.values(), self.passthrough_sink]})
        # No partition given: the producer spreads the messages over both partitions of the input.
        produce(config, self.names["source"], messages)

    def passthrough(self) -> float:
        return timed([sys.executable, __file__, "--config", str(self.config.path), "--passthrough",
                      self.names["source"], self.passthrough_sink, f"passthrough-{self.passthrough_sink}"],
                     self.logs / f"{self.label}-passthrough.log")

    def job(self, job: str) -> float:
        topics = [f"--topic={role}={name}" for role, name in self.names.items()]
        return timed([sys.executable, "-m", "stormwatch.cli", "--config", str(self.config.path), "run", job, "--",
                      "--bounded", "--group-id", f"{job}-{self.names['source']}", *topics],
                     self.logs / f"{self.label}-{job}.log")

    def measure(self) -> dict[str, float]:
        times = {"passthrough": self.passthrough()}
        for job in ("flatten_spans", "topology"):
            times[job] = self.job(job)
        times["chain"] = times["flatten_spans"] + times["topology"]
        return times


def mem_total_gib() -> float:
    with open("/proc/meminfo") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return kib / 2**20


def report(config, command, n_spans, messages, times, tiny_spans, tiny_times, outputs) -> list[str]:
    def rate(seconds: float) -> float:
        return n_spans / seconds

    def met(ok: bool) -> str:
        return "**met**" if ok else "**not met**"

    corrected = {k: times[k] - tiny_times[k] for k in times}
    rows = []
    for key, what in (("passthrough", "Flink passthrough (raw Kafka → Kafka)"), ("flatten_spans", "flatten_spans"),
                      ("topology", "topology"), ("chain", "chain: flatten_spans + topology")):
        fixed = f"{corrected[key]:.1f} s, {rate(corrected[key]):,.0f}" if corrected[key] > 0 else "n/a (not above start-up)"
        rows.append(f"| {what} | {times[key]:.1f} s | {rate(times[key]):,.0f} | {tiny_times[key]:.1f} s | {fixed} |")
    ratio_wall = times["passthrough"] / times["chain"]
    ratio_fixed = corrected["passthrough"] / corrected["chain"] if min(corrected.values()) > 0 else None
    chain_wall, chain_fixed = rate(times["chain"]), rate(corrected["chain"]) if corrected["chain"] > 0 else None
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parallelism = config.get("flink", "parallelism")
    lines = results_file.heading("Topology chain throughput against Flink's own passthrough", command) + [
        f"- Date: {now}",
        f"- Machine: {os.cpu_count()} cores (nproc), {mem_total_gib():.1f} GiB memory, {platform.platform()}",
        f"- Flink: embedded mini-cluster per job (`stormwatch run`, each job its own process), parallelism {parallelism}",
        f"- Kafka: one local KRaft broker ({config.bootstrap_servers}), every topic 2 partitions",
        f"- Input: {n_spans:,} spans in {len(messages):,} OTLP JSON messages, {sum(map(len, messages)):,} bytes "
        f"(TraceGenerator seed {SEED}, {TRACE_RATE:g} traces/s of event time, spans sorted by end time, "
        f"at most 256 per message)",
        f"- Start-up run: the same jobs on {tiny_spans:,} spans (its own topics)",
        "",
        "## Figures",
        "",
        "*Wall* is the job's process wall time from start to exit: it **includes** the JVM, mini-cluster and "
        "job start-up (about 10-15 s a job). *Start-up-corrected* is wall time minus the same job's wall time "
        "on the tiny input, i.e. an estimate of the time spent on the data. spans/s is always input spans "
        "divided by that time (the passthrough copies messages; the figure counts the spans they hold).",
        "",
        "| job | wall | spans/s (wall) | wall, tiny input | start-up-corrected time, spans/s |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Ratio chain / passthrough (throughput): {ratio_wall:.2f} on wall time"
        + (f", {ratio_fixed:.2f} start-up-corrected." if ratio_fixed is not None else "; start-up-corrected: n/a."),
        "",
        "Output records: " + ", ".join(f"{topic} {count:,}" for topic, count in outputs.items()) + ".",
        "",
        "## Against the issue's targets",
        "",
        f"- ≥ {TARGET_SPANS_PER_S:,} spans/s through the chain: wall {chain_wall:,.0f} spans/s, "
        f"{met(chain_wall >= TARGET_SPANS_PER_S)}; start-up-corrected "
        + (f"{chain_fixed:,.0f} spans/s, {met(chain_fixed >= TARGET_SPANS_PER_S)}." if chain_fixed else "n/a."),
        f"- ≥ {TARGET_RATIO} of the passthrough: wall {ratio_wall:.2f}, {met(ratio_wall >= TARGET_RATIO)}; "
        "start-up-corrected "
        + (f"{ratio_fixed:.2f}, {met(ratio_fixed >= TARGET_RATIO)}." if ratio_fixed is not None else "n/a."),
    ]
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=500_000, help="spans in the input (whole traces, so a few more)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--config", type=Path, default=BENCH_CONFIG)
    # Internal: the passthrough job, run by the benchmark in a process of its own like the chain's jobs.
    parser.add_argument("--passthrough", nargs=3, metavar=("SOURCE", "SINK", "GROUP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    config = load(args.config)
    if args.passthrough:
        passthrough(config, *args.passthrough)
        return

    command = "cd /work/main && .venv/bin/python bench/topology_throughput.py" + "".join(f" {a}" for a in argv)
    broker = KafkaBroker(config)
    started = broker.pid() is None
    print(broker.start(), flush=True)
    try:
        logs = config.runtime_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        tiny_messages, tiny_spans = messages_of(TINY_SPANS)
        messages, n_spans = messages_of(args.spans)
        print(f"input: {n_spans} spans, {len(messages)} messages, {sum(map(len, messages))} bytes", flush=True)
        tiny = Run(config, "tiny", tiny_messages, logs)
        full = Run(config, "full", messages, logs)
        tiny_times = tiny.measure()
        print(f"tiny input ({tiny_spans} spans): {tiny_times}", flush=True)
        times = full.measure()
        print(f"full input: {times}", flush=True)
        outputs = {full.passthrough_sink: records_in(config, full.passthrough_sink),
                   **{full.names[r]: records_in(config, full.names[r]) for r in CHAIN_ROLES if r != "source"}}
        lines = report(config, command, n_spans, messages, times, tiny_spans, tiny_times, outputs)
    finally:
        if started:
            print(broker.stop(), flush=True)
    results_file.write(args.out, lines)


if __name__ == "__main__":
    main(sys.argv[1:])
