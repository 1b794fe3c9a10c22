"""Every job on a standalone Flink cluster, fed live generated traffic with the storm schedule: how long
after a window can close its records are on Kafka, how long after a fault its first decisions come, and
the TaskManager's memory over the run.

The benchmark's own broker and cluster (bench/stormwatch-bench.toml) run the demo's jobs
(stormwatch.job_registry.CHAIN: spans, health, scaling) at parallelism 1 with a 5 s watermark, as a live
deployment does, exactly-once or, with `--guarantee at-least-once`, at least once. The configured topics are made anew, with `message.timestamp.type=LogAppendTime`, so
each record's Kafka timestamp is the moment the broker appended it. The traffic starts once every job
is RUNNING and the span path has dead-lettered a probe message, and is paced to the wall clock: its
event time is the wall clock, so a window [start, end) can close at wall time end + out-of-orderness +
the trace quiet time (a trace ending at the window's end is assembled that long after).

    .venv/bin/python bench/live_pipeline.py [--minutes 10] [--rate 20] [--guarantee at-least-once]
        [--out bench/results/live_pipeline.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)
from throughput import BENCH_CONFIG  # noqa: E402

from kafka import TopicPartition  # noqa: E402

from connectors.kafka import admin, consumer, create_topics, delete_topics, producer  # noqa: E402
from stormwatch import catalog  # noqa: E402
from stormwatch.config import Config, load  # noqa: E402
from stormwatch import job_registry  # noqa: E402
from stormwatch.job_registry import CHAIN  # noqa: E402
from stormwatch.runtime.flink_cluster import FlinkCluster  # noqa: E402
from stormwatch.runtime.kafka_broker import KafkaBroker  # noqa: E402
from stormwatch.runtime.processes import wait_until  # noqa: E402
from stormwatch.traffic.schedule import load_schedule  # noqa: E402
from stormwatch.traffic.send import generate  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "live_pipeline.md"
SCHEDULE = "storm"
FAULTY = "llm-inference"
SEED = 7
SAMPLE_EVERY_S = 10.0
# Outputs with window bounds, by topic role, in the order data flows through the jobs.
WINDOWED = ["edges", "service_windows", "latency_stages", "error_breaks", "span_instances", "topology_snapshots", "suspects",
            "instance_windows", "health", "breaker_decisions", "retry_decisions", "pareto_fronts", "scaling_decisions"]
TM_METRICS = ["Status.JVM.Memory.Heap.Used", "Status.JVM.Memory.NonHeap.Used", "Status.JVM.Memory.Direct.MemoryUsed",
              "Status.Flink.Memory.Managed.Used"]


def live_config(bench: Config, guarantee: str, export_batch_ms: int) -> Path:
    """The benchmark's configuration for a live deployment: one slot per job, parallelism 1, 5 s watermark,
    the generator's spans sent in batches of `export_batch_ms` of end time."""
    path = bench.runtime_dir / "live-pipeline.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"base = {json.dumps(str(bench.path))}\n[flink]\nparallelism = 1\ntaskmanager_slots = {len(CHAIN)}\n"
                    "[pipeline.spans]\nwatermark_out_of_orderness_seconds = 5\n"
                    f"[pipeline.generator]\nexport_batch_ms = {export_batch_ms}\n"
                    f"[pipeline.delivery]\nguarantee = {json.dumps(guarantee)}\n")
    return path


def fresh_topics(config: Config) -> None:
    delete_topics(config, set(config.topics))
    create_topics(config, {name: {**spec, "config": {**spec.get("config", {}), "message.timestamp.type": "LogAppendTime"}}
                           for name, spec in config.topics.items()})


class Collector(threading.Thread):
    """Every record of the watched topics with its append time and the moment this reader, read_committed
    as the project's readers are, received it (what a subscriber to the decisions sees: for exactly-once
    jobs, after the checkpoint that commits it), from the start of the run."""

    def __init__(self, config: Config, roles: dict[str, str]) -> None:
        super().__init__(name="collector", daemon=True)
        self.roles = roles  # topic -> role
        # A fetch waits at most 20 ms for data: the receipt time is within that of the record's arrival.
        self.client = consumer(config, *roles, consumer_timeout_ms=500, fetch_max_wait_ms=20)
        self.records: list[tuple[str, int, int, dict]] = []  # (role, append time ms, received ms, value)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for message in self.client:
                try:
                    value = json.loads(message.value)
                except ValueError:
                    continue
                self.records.append((self.roles[message.topic], message.timestamp, time.time_ns() // 10**6, value))
                if self.stop.is_set():
                    break
        self.client.close()

    def of(self, role: str) -> list[tuple[int, dict]]:
        return [(t, v) for r, t, _, v in list(self.records) if r == role]

    def received(self, role: str) -> list[tuple[int, dict]]:
        return [(seen, v) for r, _, seen, v in list(self.records) if r == role]


class MemorySampler(threading.Thread):
    """The TaskManager's JVM memory (Flink's metrics over REST), its process's resident set, and the
    jobs' state: the full size of each one's latest completed checkpoint, summed."""

    def __init__(self, cluster: FlinkCluster, jobs: list[str]) -> None:
        super().__init__(name="memory", daemon=True)
        self.cluster = cluster
        self.jobs = jobs
        self.samples: list[dict[str, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self.stop.wait(SAMPLE_EVERY_S):
            sample = {"minute": (time.monotonic() - start) / 60, **self._jvm(), "rss": _rss_bytes(self._pid()),
                      "state": sum(self._state_size(job) for job in self.jobs)}
            self.samples.append(sample)

    def _jvm(self) -> dict[str, float]:
        with urllib.request.urlopen(f"{self.cluster.rest_url}/taskmanagers", timeout=5) as r:
            [tm] = json.load(r)["taskmanagers"]
        url = f"{self.cluster.rest_url}/taskmanagers/{tm['id']}/metrics?get={','.join(TM_METRICS)}"
        with urllib.request.urlopen(url, timeout=5) as r:
            return {m["id"]: float(m["value"]) for m in json.load(r)}

    def _state_size(self, job: str) -> float:
        latest = self.cluster.checkpoints(job)["latest"]["completed"]
        return float(latest["state_size"]) if latest else 0.0

    def _pid(self) -> int:
        [pid_file] = (self.cluster.home / "pid").glob("flink-*-taskexecutor.pid")
        return int(pid_file.read_text().split()[0])


def _rss_bytes(pid: int) -> float:
    """Resident set of `pid` and its descendants (Python workers, were any started outside the JVM)."""
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children[int(fields[1])].append(int(stat.parent.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            rss = next(line for line in Path(f"/proc/{p}/status").read_text().splitlines() if line.startswith("VmRSS:"))
            total += int(rss.split()[1]) * 1024
        except (OSError, StopIteration):
            pass
    return total


def submit_all(config: Config, cluster: FlinkCluster) -> list[str]:
    ids = [cluster.submit(job_registry.path(job), ["--config", str(config.path), "--from-earliest"]) for job in CHAIN]
    wait_until(lambda: {j["jid"]: j["state"] for j in cluster.jobs() if j["jid"] in ids} == dict.fromkeys(ids, "RUNNING"),
               180, "every job RUNNING")
    return ids


def await_flattening(config: Config, collector: Collector, source: str) -> None:
    """A message that is not OTLP until its dead letter is back: the span path then reads the topic."""
    client = producer(config)
    try:
        deadline = time.monotonic() + 300
        while not collector.of("dead_letters"):
            if time.monotonic() > deadline:
                raise SystemExit("the span path dead-lettered no probe message in 300 s; see the cluster's logs")
            client.send(source, b"probe: not OTLP")
            client.flush()
            time.sleep(5)
    finally:
        client.close()


def settle(collector: Collector, traffic_end_ms: int, config: Config, quiet_s: float = 30.0, cap_s: float = 600.0) -> None:
    """Wait until the last windowed record is `quiet_s` old and the span path has written a window
    ending within a window of the traffic's end, or `cap_s` passed."""
    size_ms = int(config.get("pipeline", "topology", "window_size_seconds")) * 1000
    deadline = time.monotonic() + cap_s
    while time.monotonic() < deadline:
        time.sleep(5)
        newest = max((t for role in WINDOWED for t, _ in collector.of(role)), default=0)
        last_window = max((v.get("window_end_ms", 0) for _, v in collector.of("service_windows")), default=0)
        if last_window >= traffic_end_ms - size_ms and time.time_ns() // 10**6 - newest > quiet_s * 1000:
            return


def source_read(config: Config, topic: str, group: str) -> tuple[int, int]:
    """(records on the source topic, offsets the span path's group committed on it): equal when the
    span path read everything sent. Flink commits its offsets to Kafka with each checkpoint."""
    client = admin(config)
    reader = consumer(config)
    try:
        partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
        ends = reader.end_offsets(partitions)
        committed = client.list_group_offsets({group: None})[group]  # kafka-python 3's name
    finally:
        reader.close()
        client.close()
    return sum(ends.values()), sum(o.offset for tp, o in committed.items() if tp.topic == topic and o.offset >= 0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of live traffic")
    parser.add_argument("--rate", type=float, default=20.0, help="traces per second")
    parser.add_argument("--guarantee", choices=("exactly-once", "at-least-once"), default="exactly-once",
                        help="[pipeline.delivery] guarantee of every job")
    parser.add_argument("--export-batch-ms", type=int, default=100,
                        help="the generator sends the spans that ended in each this many ms as one batch, when it "
                             "is over, as a Collector's batch processor (its timeout: 200 ms by default) does; a "
                             "window cannot close before the batch holding its closing span is sent")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--config", type=Path, default=BENCH_CONFIG)
    args = parser.parse_args(argv)
    command = results_file.command(__file__, argv)
    config = load(live_config(load(args.config), args.guarantee, args.export_batch_ms))
    names = catalog.topics(config)
    broker, cluster = KafkaBroker(config), FlinkCluster(config)
    started_broker, schedule = broker.pid() is None, load_schedule(SCHEDULE)
    print(broker.start(), flush=True)
    try:
        if cluster.pids():  # its slots must match this run's jobs
            print(cluster.stop(), flush=True)
        print(cluster.start(), flush=True)
        fresh_topics(config)
        collector = Collector(config, {names[r]: r for r in [*WINDOWED, "dead_letters"]})
        collector.start()
        jobs = submit_all(config, cluster)
        print(f"jobs RUNNING: {dict(zip(CHAIN, jobs))}", flush=True)
        await_flattening(config, collector, names["source"])
        memory = MemorySampler(cluster, jobs)
        memory.start()
        t0_ms = time.time_ns() // 10**6
        print(f"traffic: {args.rate:g} traces/s for {args.minutes:g} min, schedule {SCHEDULE}", flush=True)
        sent = generate(config, schedule, args.rate, args.minutes * 60, SEED)
        end_ms = time.time_ns() // 10**6
        # Until every job has written its last windows: the span path's and health's last windows close
        # on the idle timeout's watermark, scaling's after health's; a cap, not a guess.
        settle(collector, end_ms, config)
        memory.stop.set()
        read = source_read(config, names["source"], config.get("pipeline", "topology", "consumer_group"))
        collector.stop.set()
        memory.join(timeout=30)
        collector.join(timeout=30)
        lines = report(config, command, args, schedule, t0_ms, end_ms, sent, collector, memory.samples, read)
        for job in jobs:
            cluster.cancel(job)
    finally:
        print(cluster.stop(), flush=True)
        if started_broker:
            print(broker.stop(), flush=True)
    results_file.write(args.out, lines)


def dead_letter_examples(letters: list[tuple[int, dict]], per_reason: int = 3) -> list[str]:
    """The first few dead letters of each reason, their payloads cut short: what a reader needs to tell
    a lost span from a hostile probe."""
    shown: dict[str, int] = Counter()
    lines = []
    for _, v in letters:
        reason = str(v.get("reason", "?"))
        if shown[reason.split(":")[0]] < per_reason:
            shown[reason.split(":")[0]] += 1
            lines.append(f"- {reason[:160]}: `{str(v.get('payload', ''))[:300]}`")
    return ["", "Examples:", "", *lines] if lines else []


def report(config, command, args, schedule, t0_ms, end_ms, sent, collector: Collector, samples, read) -> list[str]:
    ooo_ms = int(config.get("pipeline", "spans", "watermark_out_of_orderness_seconds")) * 1000
    quiet_ms = round(float(config.get("pipeline", "topology", "trace_quiet_seconds")) * 1000)
    guarantee = config.get("pipeline", "delivery", "guarantee")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    [fault] = [f for f in schedule.faults if f.service == FAULTY]
    fault_ms, fault_end_ms = t0_ms + round(fault.start_s * 1000), t0_ms + round(fault.end_s * 1000)
    lines = results_file.heading("Live pipeline: decision latency, time to the first decision, TaskManager memory", command) + [
        f"- Date: {now}",
        f"- Flink: standalone cluster of the benchmark ({config.get('flink', 'taskmanager_memory')} TaskManager, "
        f"{len(CHAIN)} slots), jobs {', '.join(CHAIN)} at parallelism 1, watermark {ooo_ms // 1000} s out of order, "
        f"trace quiet time {quiet_ms} ms, delivery {guarantee}" + (
            f" (checkpoint interval {config.section('flink', 'job_config').get('execution.checkpointing.interval')})" if guarantee == "exactly-once" else ""),
        f"- Traffic: {args.rate:g} traces/s for {args.minutes:g} min paced to the wall clock (seed {SEED}), "
        f"{sent.spans:,} spans ({sent.spans / (args.minutes * 60):,.0f}/s) in {sent.span_messages:,} messages "
        f"(batches of {args.export_batch_ms} ms of span ends) and {sent.metrics_messages:,} metrics records; "
        f"schedule `{SCHEDULE}`: {FAULTY} faulty from {fault.start_s:g} s to {fault.end_s:g} s",
        "",
        "## Decision latency",
        "",
        "From the moment a window can close (its end + the watermark's out-of-orderness + the trace quiet "
        "time, on the wall clock, which live traffic's event time follows) to the broker's append time of the "
        "record (topics with `message.timestamp.type=LogAppendTime`), and to the moment a read_committed reader received it (*seen*: for exactly-once jobs, after the checkpoint that commits it). A record downstream of another job "
        "includes that job's latency and its Kafka hop: health reads the span path's per-instance figures, "
        "scaling health's instance windows. Exactly-once: a record is readable when its checkpoint commits. "
        "Only windows that could close before new traces stopped (the traffic's duration) count: after it only "
        "the longest traces still send spans, a source partition can go without any, and the last windows close "
        "on its idle timeout (tens of seconds), which is no measure of the path. The first windows include the "
        "jobs' warm-up.",
        "",
        "| output | records | p50 ms | p99 ms | max ms | seen p50 ms | seen p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    # Traces start at the traffic's rate until its duration is over; after that only the longest ones
    # still send spans, one partition of the source can go without any, and the reader's watermark then
    # waits for its idle timeout: windows that close after it measure the tail, not the path.
    steady_end_ms = t0_ms + round(args.minutes * 60_000)

    def after_close(records: list[tuple[int, dict]]) -> list[int]:
        return [t - (v["window_end_ms"] + ooo_ms + quiet_ms) for t, v in records
                if "window_end_ms" in v and v["window_end_ms"] + ooo_ms + quiet_ms <= steady_end_ms]

    for role in WINDOWED:
        latencies, seen = after_close(collector.of(role)), after_close(collector.received(role))
        if latencies:
            lines.append(f"| {catalog.topics(config)[role]} | {len(latencies):,} | {percentile(latencies, 0.5):,.0f} "
                         f"| {percentile(latencies, 0.99):,.0f} | {max(latencies):,.0f} "
                         f"| {percentile(seen, 0.5):,.0f} | {percentile(seen, 0.99):,.0f} |")
        else:
            lines.append(f"| {catalog.topics(config)[role]} | 0 | | | | | |")

    def first(role: str, predicate, after_ms: int) -> str:
        hits = sorted((v["window_end_ms"], t) for t, v in collector.received(role) if v.get("window_end_ms", 0) > after_ms
                      and predicate(v))
        if not hits:
            return "| none | |"
        window_end, appended = hits[0]
        return f"| {(window_end - after_ms) / 1000:.1f} s | {(appended - after_ms) / 1000:.1f} s |"

    entity = f"service:{FAULTY}"
    lines += [
        "",
        "## From the fault to its first decisions",
        "",
        f"The fault starts at {fault.start_s:g} s of traffic and ends at {fault.end_s:g} s. *Event time*: the first "
        "such record's window end minus the fault's start (or end); *wall*: the moment a read_committed reader received it minus the same moment.",
        "",
        "| first record | event time | wall |",
        "|---|---|---|",
        f"| breaker of {entity} OPEN " + first("breaker_decisions", lambda v: v["entity"]["key"] == entity
                                               and v["state"] == "OPEN", fault_ms),
        f"| retry gate of {entity} at 0 retries " + first("retry_decisions", lambda v: v["entity"]["key"] == entity
                                                          and v["max_retries"] == 0, fault_ms),
        f"| {FAULTY} flagged suspect #1 " + first("suspects", lambda v: v["service"] == FAULTY and v["flagged"]
                                                  and v["rank"] == 1, fault_ms),
        f"| {FAULTY} scale-out " + first("scaling_decisions", lambda v: v["service"] == FAULTY
                                         and v["action"] == "scale_out", fault_ms),
        f"| after the fault's end: breaker of {entity} CLOSED " + first(
            "breaker_decisions", lambda v: v["entity"]["key"] == entity and v["state"] == "CLOSED", fault_end_ms),
    ]
    on_topic, committed = read
    lines += ["", f"Input check: the source topic holds {on_topic:,} messages (the traffic's {sent.span_messages:,} and "
              f"the probes); the span path's consumer group committed offsets for {committed:,}: "
              + ("**all read**." if committed == on_topic else "**not all read** (the figures above miss some input).")]
    dead = Counter(str(v.get("reason", "?")).split(":")[0] for _, v in collector.of("dead_letters"))
    lines += ["", "Dead letters by reason: " + (", ".join(f"{r} {n}" for r, n in dead.most_common()) or "none") + ".",
              *dead_letter_examples(collector.of("dead_letters")), "", *memory_section(samples)]
    return lines


def memory_section(samples: list[dict[str, float]]) -> list[str]:
    mib = 2**20
    lines = ["## TaskManager memory over the run", "",
             f"Sampled every {SAMPLE_EVERY_S:g} s from the start of the traffic: Flink's JVM metrics of the TaskManager "
             "over REST and the resident set of its process (the Python UDFs run inside it, thread mode); the "
             "state of all jobs: the full size of each job's latest completed checkpoint (RocksDB, incremental), "
             "summed. Per minute, the last sample.", "",
             "| minute | heap used MiB | non-heap MiB | direct MiB | managed MiB | process RSS MiB | state MiB |",
             "|---|---|---|---|---|---|---|"]
    per_minute = {int(s["minute"]): s for s in samples}
    for minute, s in sorted(per_minute.items()):
        lines.append(f"| {minute} | {s['Status.JVM.Memory.Heap.Used'] / mib:,.0f} | "
                     f"{s['Status.JVM.Memory.NonHeap.Used'] / mib:,.0f} | {s['Status.JVM.Memory.Direct.MemoryUsed'] / mib:,.0f} "
                     f"| {s['Status.Flink.Memory.Managed.Used'] / mib:,.0f} | {s['rss'] / mib:,.0f} | {s['state'] / mib:,.1f} |")
    half = [s for s in samples if s["minute"] >= samples[-1]["minute"] / 2] if samples else []
    if len(half) >= 2:
        slope = statistics.linear_regression([s["minute"] for s in half], [s["rss"] / mib for s in half]).slope
        heap = statistics.linear_regression([s["minute"] for s in half],
                                            [s["Status.JVM.Memory.Heap.Used"] / mib for s in half]).slope
        state = statistics.linear_regression([s["minute"] for s in half], [s["state"] / mib for s in half]).slope
        lines += ["", f"Trend over the second half of the run (least squares): RSS {slope:+.1f} MiB/min, "
                      f"heap used {heap:+.1f} MiB/min (heap used moves with garbage collection; RSS is what the "
                      f"machine pays), state {state:+.2f} MiB/min."]
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
