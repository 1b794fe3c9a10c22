"""Steady-state throughput of the span path (one job, `--job`, default `spans`) against Flink's own
Kafka -> Kafka passthrough of the same OTLP messages, on this machine, in one run.

Input: generated AI-chain traces (stormwatch.traffic.generator, fixed seed), re-batched as the
Collector sends them (spans in end-time order, at most 256 per message), in the configured encoding,
produced once by a plain (non-transactional) producer to a fresh 2-partition topic of the benchmark's
own broker (bench/stormwatch-bench.toml), message i to partition i % 2. Before anything is timed,
the producer's count and the topic's offsets must show exactly the messages sent.

Both jobs run live (not bounded) on the benchmark's standalone cluster, parallelism 2, exactly-once
(checkpoints, transactional sinks), one after the other on that input. While one runs, every second
the bench reads each of its Kafka sources' per-partition offsets from Flink's REST API (the
KafkaSourceReader `currentOffset` metrics) and turns them into spans read, with the known span count
of every message: the slowest source of the job (flatten_spans and spans read the topic twice) per
partition. The rate is Δspans / Δt between the first and the last sample from 20 % to 80 % of the
input read: start-up, ramp-up and the last, partly filled fetches are outside it. Once the input is
read the job is stopped with a savepoint (its sinks commit what they hold), and its outputs' committed
records (read_committed: transaction markers are not records) are counted and checked.

    .venv/bin/python bench/throughput.py [--job spans] [--spans 2000000] \\
        [--out bench/results/throughput.md] [--json bench/results/throughput.json]
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import heapq
import inspect
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
# Run as a script from anywhere: stormwatch/ and connectors/ are packages at the project root.
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from kafka import TopicPartition  # noqa: E402

from connectors.kafka import consumer, create_topics, delete_topics, producer  # noqa: E402
from connectors.otlp import encode_json, encoder, write_encoding  # noqa: E402
from stormwatch import job_registry  # noqa: E402
from stormwatch.config import Config, load  # noqa: E402
from stormwatch.replay import deliver  # noqa: E402
from stormwatch.runtime.flink_cluster import FlinkCluster  # noqa: E402
from stormwatch.runtime.kafka_broker import KafkaBroker  # noqa: E402
from stormwatch.runtime.processes import wait_until  # noqa: E402
from stormwatch.traffic.generator import TraceGenerator  # noqa: E402
from stormwatch.traffic.otlp import to_export_requests  # noqa: E402
from stormwatch.traffic.topology import DEFAULT_TOPOLOGY, Topology  # noqa: E402

BENCH_CONFIG = ROOT / "bench" / "stormwatch-bench.toml"
RESULTS = ROOT / "bench" / "results"
SEED = 42
# Traces per second of event time: ~12 spans each, so 2M spans cover about 28 minutes of traffic.
TRACE_RATE = 100.0
PARTITIONS = 2
# The topics a job under test may write, each made fresh for the run.
OUTPUT_ROLES = ("sink", "dead_letters", "edges", "service_windows", "error_breaks", "latency_stages", "span_instances",
                "suspects", "topology_snapshots", "edge_events")
SAMPLE_EVERY_S = 1.0
# The Collector's batches, as the demo and the tests send them.
MAX_SPANS_PER_MESSAGE = 256
# The steady state: from this share of the input read to that one.
WINDOW = (0.2, 0.8)
# Less work than this in the window and one sample's staleness (up to a second) weighs too much.
MIN_WINDOW_S = 20.0
# The targets.
TARGET_SPANS_PER_S = 100_000
TARGET_RATIO = 0.6
# KafkaSourceReader's per-partition metric: the offset of the last record fetched (-1 before any).
OFFSET_METRIC = re.compile(r"^(?P<reader>.+)\.KafkaSourceReader\.topic\.(?P<topic>.+)\.partition\.(?P<partition>\d+)"
                           r"\.currentOffset$")


def request_chunks(spans_wanted: int, topology: Topology = DEFAULT_TOPOLOGY,
                   chunk_spans: int = 65_536) -> Iterator[list[dict]]:
    """At least `spans_wanted` spans in whole traces, as the Collector's ExportTraceServiceRequests, in
    chunks: every span in end-time order (ties in the order generated), at most MAX_SPANS_PER_MESSAGE a
    message, the same messages as one sort of all spans would give. Streamed, so millions of spans fit in
    memory: a trace's spans end no earlier than its root starts, and roots start in order, so a span
    ending at or before the newest root's start can be sent."""
    pending: list[tuple[int, int, object]] = []  # (end, order generated, span): a heap
    ready, generated = [], 0
    for trace in TraceGenerator(seed=SEED, topology=topology).generate(TRACE_RATE):
        root_start = min(s.start_unix_nano for s in trace)
        for s in trace:
            heapq.heappush(pending, (s.end_unix_nano, generated, s))
            generated += 1
        while pending and pending[0][0] <= root_start:
            ready.append(heapq.heappop(pending)[2])
        if len(ready) >= chunk_spans:
            whole = len(ready) - len(ready) % MAX_SPANS_PER_MESSAGE
            yield to_export_requests(ready[:whole], MAX_SPANS_PER_MESSAGE)
            ready = ready[whole:]
        if generated >= spans_wanted:
            break
    ready += [heapq.heappop(pending)[2] for _ in range(len(pending))]
    if ready:
        yield to_export_requests(ready, MAX_SPANS_PER_MESSAGE)


def requests_of(spans_wanted: int, topology: Topology = DEFAULT_TOPOLOGY) -> list[dict]:
    """`request_chunks` as one list."""
    return [r for chunk in request_chunks(spans_wanted, topology) for r in chunk]


def spans_in(request: dict) -> int:
    return sum(len(ss["spans"]) for rs in request["resourceSpans"] for ss in rs["scopeSpans"])


def messages_of(spans_wanted: int, topology: Topology = DEFAULT_TOPOLOGY) -> tuple[list[bytes], int]:
    """`requests_of` as OTLP JSON messages; (messages, span count). For bench/growth.py."""
    requests = requests_of(spans_wanted, topology)
    return [encode_json(r) for r in requests], sum(map(spans_in, requests))


@dataclass(frozen=True)
class Input:
    """The input topic as produced: message i of the input went to partition i % PARTITIONS."""

    topic: str
    messages: int
    bytes: int
    # Per partition: the spans in its first k messages, k = 0 .. its message count.
    cumulative: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, topic: str, sizes: list[int], spans: list[int]) -> Input:
        """Message i of `sizes` bytes holding spans[i] spans, sent to partition i % PARTITIONS."""
        cumulative = []
        for p in range(PARTITIONS):
            sums = [0]
            for n in spans[p::PARTITIONS]:
                sums.append(sums[-1] + n)
            cumulative.append(tuple(sums))
        return cls(topic, len(sizes), sum(sizes), tuple(cumulative))

    @property
    def spans(self) -> int:
        return sum(c[-1] for c in self.cumulative)

    def per_partition(self) -> dict[int, int]:
        return {p: len(c) - 1 for p, c in enumerate(self.cumulative)}

    def spans_read(self, read: dict[int, int]) -> int:
        """Spans in the first read[p] messages of every partition p."""
        return sum(c[max(0, min(read.get(p, 0), len(c) - 1))] for p, c in enumerate(self.cumulative))


def write_input(config: Config, topic: str, chunks: Iterable[tuple[list[bytes], list[int]]],
                record: Path | None = None) -> Input:
    """Produce the input, chunk by chunk of (messages, the spans of each), message i to partition
    i % PARTITIONS, and check that the topic holds exactly it, or stop: nothing is timed on a partial
    input. The producer is not transactional, so end offsets count records. What was produced is
    recorded in `record`, for later runs of the same code (`reused_input`)."""
    create_topics(config, {topic: {"partitions": PARTITIONS}})
    sizes: list[int] = []
    spans: list[int] = []
    client = producer(config)
    try:
        for messages, counts in chunks:
            first = len(sizes)
            sizes += map(len, messages)
            spans += counts
            for p in range(PARTITIONS):
                sent = messages[(p - first) % PARTITIONS::PARTITIONS]
                delivered = deliver(client, ((topic, None, m) for m in sent), partition=p, total=len(sent))
                if delivered != len(sent):
                    raise SystemExit(f"input: {delivered} of {len(sent)} messages delivered to {topic}[{p}]")
    finally:
        client.close()
    data = Input.of(topic, sizes, spans)
    problem = unlike(config, data)
    if problem:
        raise SystemExit(f"input: {problem}")
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"topic": topic, "sizes": sizes, "spans": spans}))
    return data


def unlike(config: Config, data: Input) -> str | None:
    """What differs between the topic and the input as produced (None: it holds exactly those
    messages, from offset 0 on each partition)."""
    client = consumer(config)
    try:
        if data.topic not in client.topics():
            return f"no topic {data.topic}"
        partitions = [TopicPartition(data.topic, p) for p in range(PARTITIONS)]
        begins = {tp.partition: o for tp, o in client.beginning_offsets(partitions).items()}
        ends = {tp.partition: o for tp, o in client.end_offsets(partitions).items()}
    finally:
        client.close()
    if begins != dict.fromkeys(range(PARTITIONS), 0) or ends != data.per_partition():
        return f"{data.topic} holds offsets {begins} to {ends}, not the {data.per_partition()} messages sent"
    return None


def input_record(config: Config, spans_wanted: int, encoding: str) -> Path:
    """Where a produced input is recorded for later runs: named by what makes its messages (the span
    count, the encoding, the seed, and the code that generates and encodes them)."""
    code = hashlib.sha256(f"{_code(inspect.getsource(request_chunks))} {TRACE_RATE} {MAX_SPANS_PER_MESSAGE} {PARTITIONS}".encode())
    for path in sorted([*(ROOT / "stormwatch" / "traffic").glob("*.py"), ROOT / "connectors" / "otlp.py"]):
        code.update(_code(path.read_text()).encode())
    return config.runtime_dir / "inputs" / f"{encoding}-{spans_wanted}-seed{SEED}-{code.hexdigest()[:12]}.json"


def _code(source: str) -> str:
    """Python source as what it does: its syntax tree without docstrings (comments are not in it), so a
    reworded comment does not make a 20-minute input be generated again."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            body[0] = ast.Pass()
    return ast.dump(tree)


def reused_input(record: Path, config: Config) -> Input | None:
    """The input an earlier run produced with the same code, if its topic still holds exactly it."""
    if not record.exists():
        return None
    saved = json.loads(record.read_text())
    data = Input.of(saved["topic"], saved["sizes"], saved["spans"])
    problem = unlike(config, data)
    if problem:
        print(f"input: not reusing {record.name}: {problem}", flush=True)
        return None
    return data


def committed(config: Config, topic: str) -> tuple[int, int]:
    """The committed records of `topic` and their bytes, read from the start (read_committed:
    transaction markers and aborted records are not counted)."""
    # No CRC check: kafka-python's is pure Python here (no crc32c module) and took minutes for 1 GB;
    # the broker checked every batch when it was written.
    client = consumer(config, max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20, check_crcs=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(client.partitions_for_topic(topic))]
        client.assign(partitions)
        client.seek_to_beginning(*partitions)
        ends = client.end_offsets(partitions)
        records = size = idle = 0
        # A marker after the last record leaves the position short of the end: a few empty polls end it.
        while idle < 3 and any(client.position(tp) < ends[tp] for tp in partitions):
            batches = client.poll(timeout_ms=1000)
            idle = 0 if batches else idle + 1
            for batch in batches.values():
                records += len(batch)
                size += sum(len(r.value or b"") for r in batch)
        return records, size
    finally:
        client.close()


def messages_read(cluster: FlinkCluster, job_id: str, topic: str) -> dict[int, int] | None:
    """How many messages of each partition of `topic` every source of the job has read (the least
    over its sources); None until every source reports every partition."""
    read: dict[str, dict[int, int]] = {}
    sources = [v for v in cluster.job(job_id)["vertices"] if v["name"].startswith("Source:")]
    for vertex in sources:
        ids = [m["id"] for m in cluster.metrics(job_id, vertex_id=vertex["id"])
               if (match := OFFSET_METRIC.match(m["id"])) and match["topic"] == topic]
        for metric in cluster.metrics(job_id, ids, vertex["id"]) if ids else []:
            match = OFFSET_METRIC.match(metric["id"])
            # Only the subtask reading the partition reports it: max is its value.
            read.setdefault(match["reader"], {})[int(match["partition"])] = int(metric["max"]) + 1
    if len(read) < len(sources) or any(len(parts) < PARTITIONS for parts in read.values()):
        return None
    return {p: min(parts[p] for parts in read.values()) for p in range(PARTITIONS)}


@dataclass(frozen=True)
class Window:
    """The steady-state rate: spans read between two samples, over the seconds between them."""

    rate: float
    samples: int
    start_s: float
    end_s: float
    start_spans: int
    end_spans: int

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


def steady(samples: list[tuple[float, int]], total: int, window: tuple[float, float] = WINDOW) -> Window | None:
    """Δspans / Δt over the samples (seconds, spans read) from window[0] to window[1] of `total` read;
    None with fewer than two distinct samples there (the input was read too fast to sample)."""
    inside = [(t, s) for t, s in samples if window[0] * total <= s <= window[1] * total]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    (t0, s0), (t1, s1) = inside[0], inside[-1]
    return Window((s1 - s0) / (t1 - t0), len(inside), t0, t1, s0, s1)


@dataclass(frozen=True)
class Run:
    label: str
    job_id: str
    samples: list[tuple[float, int]]  # (seconds since submission, spans read)
    restarts: int
    load: tuple[float, float]  # 1-minute load average at submission and at the end of the read
    window: Window | None


def run_live(config: Config, cluster: FlinkCluster, label: str, job_id: str, data: Input, timeout_s: float) -> Run:
    """Sample the job until it has read the whole input, then stop it with a savepoint so that its
    sinks commit everything; its checkpoints and savepoint are removed after."""
    began, load_before = time.monotonic(), os.getloadavg()[0]
    samples: list[tuple[float, int]] = []
    stopped = False
    try:
        while not samples or samples[-1][1] < data.spans:
            if time.monotonic() - began > timeout_s:
                raise SystemExit(f"{label}: job {job_id} has not read its input after {timeout_s:.0f} s")
            try:
                state = cluster.job(job_id)["state"]
                read = messages_read(cluster, job_id, data.topic)
            except OSError as e:  # the REST API slow to answer on a loaded machine: no sample this time
                print(f"{label}: no sample ({e})", flush=True)
                state, read = "RUNNING", None
            if state not in ("INITIALIZING", "CREATED", "RUNNING"):
                raise SystemExit(f"{label}: job {job_id} is {state} before reading its input (a restart would "
                                 f"read again); see {cluster.home / 'log'}")
            if read is not None:
                samples.append((time.monotonic() - began, data.spans_read(read)))
                print(f"{label}: {samples[-1][0]:6.1f} s  {samples[-1][1]:>10,} / {data.spans:,} spans", flush=True)
            time.sleep(SAMPLE_EVERY_S)
        load_after = os.getloadavg()[0]
        restarts = int(float(cluster.metrics(job_id, ["numRestarts"])[0]["value"]))
        savepoint = cluster.stop_with_savepoint(job_id)
        stopped = True
        wait_until(lambda: cluster.job(job_id)["state"] == "FINISHED", 120, f"job {job_id} to finish")
    finally:
        if not stopped:
            cluster.cancel(job_id)
    for path in (Path(urlparse(savepoint).path), config.runtime_dir / "flink" / "checkpoints" / job_id):
        if config.runtime_dir in path.parents:
            shutil.rmtree(path, ignore_errors=True)
    return Run(label, job_id, samples, restarts, (load_before, load_after), steady(samples, data.spans))


def start_profile(cluster: FlinkCluster, folder: Path, job: str) -> Path:
    """Java Flight Recorder on the TaskManager (profiling settings: a stack sample every 10-20 ms)."""
    (pid,) = cluster.taskmanager_pids()
    folder.mkdir(parents=True, exist_ok=True)
    path = (folder / f"{job}.jfr").resolve()
    subprocess.run(["jcmd", str(pid), "JFR.start", "name=stormwatch-bench", "settings=profile", f"filename={path}"],
                   check=True, capture_output=True)
    return path


def stop_profile(cluster: FlinkCluster, path: Path, command: str) -> None:
    (pid,) = cluster.taskmanager_pids()
    subprocess.run(["jcmd", str(pid), "JFR.stop", "name=stormwatch-bench"], check=True, capture_output=True)
    import jfr_top  # bench/, beside this file

    events = jfr_top.samples(path)
    lines = results_file.heading(f"Where the TaskManager spent its time: {path.name}", command) + [
        f"Java Flight Recorder (settings=profile) on the TaskManager from the job's submission to the end of its "
        f"input; summary by `.venv/bin/python bench/jfr_top.py {path}`.", "",
        "## Every thread", "", *jfr_top.summary(events)]
    results_file.write(path.with_name(f"{path.stem}-profile.md"), lines)


@contextmanager
def services(config: Config) -> Iterator[FlinkCluster]:
    """Kafka and the Flink cluster running for a measurement; on leaving, each is stopped if this started
    it (one that was running before is left running)."""
    broker, cluster = KafkaBroker(config), FlinkCluster(config)
    started_broker, started_cluster = broker.pid() is None, not cluster.pids()
    print(broker.start(), flush=True)
    try:
        print(cluster.start(), flush=True)
        yield cluster
    finally:
        if started_cluster:
            print(cluster.stop(), flush=True)
        if started_broker:
            print(broker.stop(), flush=True)


def machine() -> str:
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown CPU")
    with open("/proc/meminfo") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return f"{os.cpu_count()} cores (nproc), {cpu}, {kib / 2**20:.1f} GiB memory, {platform.platform()}"


def versions(config: Config, cluster: FlinkCluster) -> str:
    def jar(folder: Path, prefix: str) -> str:
        return next((j.stem.removeprefix(prefix) for j in sorted(folder.glob(f"{prefix}*.jar"))), "?")

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return (f"Flink {(cluster.overview() or {}).get('flink-version', '?')} (PyFlink {metadata.version('apache-flink')}, "
            f"Kafka connector {jar(config.jars_dir / 'flink', 'flink-sql-connector-kafka-')}), "
            f"Kafka {jar(KafkaBroker(config).jars, 'kafka-server-')}, Python {platform.python_version()}, "
            f"{java[0] if java else 'java ?'}; stormwatch {commit.stdout.strip() or '?'}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", default="spans", help="the span-path job under test (default: spans)")
    parser.add_argument("--spans", type=int, default=2_000_000, help="spans in the input (whole traces, so a few more)")
    parser.add_argument("--out", type=Path, default=RESULTS / "throughput.md")
    parser.add_argument("--json", type=Path, default=RESULTS / "throughput.json")
    parser.add_argument("--config", type=Path, default=BENCH_CONFIG)
    parser.add_argument("--fresh-input", action="store_true",
                        help="produce the input anew even if an earlier run of the same code left it on the broker")
    parser.add_argument("--profile", type=Path, default=None,
                        help="record the TaskManager with Java Flight Recorder while the job under test runs: "
                             "DIR/<job>.jfr and its hot code in DIR/<job>-profile.md (bench/jfr_top.py)")
    args = parser.parse_args(argv)
    if args.job not in job_registry.names():
        raise SystemExit(f"no job {args.job!r} in jobs/: {', '.join(job_registry.names())}")
    config = load(args.config)
    command = results_file.command(__file__, argv)
    with services(config) as cluster:
        encoding = config.get("pipeline", "spans", "encoding")
        record = input_record(config, args.spans, write_encoding(encoding))
        suffix = uuid.uuid4().hex[:8]
        data = None if args.fresh_input else reused_input(record, config)
        if data is None:
            encode_request = encoder(encoding)
            chunks = (([encode_request(r) for r in requests], [spans_in(r) for r in requests])
                      for requests in request_chunks(args.spans))
            data = write_input(config, f"bench_source_{suffix}", chunks, record)
        else:
            print(f"input: reusing {data.topic}, produced by an earlier run of the same code ({record.name})", flush=True)
        print(f"input: {data.spans:,} spans in {data.messages:,} messages, {data.bytes:,} bytes, per partition "
              f"{data.per_partition()}: verified", flush=True)
        outputs = {role: f"bench_{role}_{suffix}" for role in OUTPUT_ROLES}
        passthrough_sink = f"bench_passthrough_{suffix}"
        create_topics(config, {t: {"partitions": PARTITIONS} for t in [passthrough_sink, *outputs.values()]})
        timeout_s = 600 + data.spans / 1000

        job_id = cluster.submit(ROOT / "bench" / "passthrough.py", ["--config", str(config.path), data.topic,
                                                                     passthrough_sink, f"bench-passthrough-{suffix}"])
        passthrough = run_live(config, cluster, "passthrough", job_id, data, timeout_s)
        job_id = cluster.submit(job_registry.path(args.job), [
            "--config", str(config.path), "--from-earliest", "--group-id", f"bench-{args.job}-{suffix}",
            f"--topic=source={data.topic}", *(f"--topic={role}={name}" for role, name in outputs.items())])
        recording = start_profile(cluster, args.profile, args.job) if args.profile else None
        chain = run_live(config, cluster, args.job, job_id, data, timeout_s)
        if recording:
            stop_profile(cluster, recording, command)

        counts = {role: committed(config, name)[0] for role, name in outputs.items()}
        copied = committed(config, passthrough_sink)
        lines, figures = report(config, cluster, command, args.job, data, passthrough, chain, copied, counts, outputs)
        # Counted: the outputs go (the passthrough's alone is the input's 3.7 GB again); the input stays
        # for the next run. Left behind, they filled the broker's disk and page cache run after run.
        delete_topics(config, {passthrough_sink, *outputs.values()})
    results_file.write(args.out, lines)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {args.out} and {args.json}")
    if not all(check["ok"] for check in figures["checks"]):
        raise SystemExit("some checks failed: see the results")


def report(config, cluster, command, job, data: Input, passthrough: Run, chain: Run, copied: tuple[int, int],
           counts: dict[str, int], outputs: dict[str, str]) -> tuple[list[str], dict]:
    def met(ok: bool) -> str:
        return "**met**" if ok else "**not met**"

    checks = [
        (f"passthrough output: {copied[0]:,} committed records, {copied[1]:,} bytes; the input: {data.messages:,} "
         f"messages, {data.bytes:,} bytes", copied == (data.messages, data.bytes)),
    ]
    if job == "flatten_spans":
        checks.append((f"flatten_spans: spans out {counts['sink']:,} + dead letters {counts['dead_letters']:,} "
                       f"= spans in {data.spans:,}", counts["sink"] + counts["dead_letters"] == data.spans))
    else:
        produced = sum(n for role, n in counts.items() if role != "dead_letters")
        checks.append((f"{job}: {produced:,} committed records on its outputs (not empty)", produced > 0))
    checks += [(f"{run.label}: {run.restarts} restarts while reading (a restart reads again)", run.restarts == 0)
               for run in (passthrough, chain)]

    rows = []
    for run, what in ((passthrough, "Flink passthrough (raw Kafka → Kafka)"), (chain, f"`{job}`")):
        w = run.window
        first = next(t for t, s in run.samples if s > 0) if any(s for _, s in run.samples) else run.samples[-1][0]
        rows.append(f"| {what} | " + (f"**{w.rate:,.0f}** | {w.start_s:.1f}–{w.end_s:.1f} s ({w.seconds:.1f} s) "
                                      f"| {w.samples} | {w.start_spans:,} → {w.end_spans:,}" if w else
                                      "n/a | fewer than 2 samples in the window | | ")
                    + f" | {first:.1f} s → {run.samples[-1][0]:.1f} s | {run.load[0]:.1f} / {run.load[1]:.1f} |")
    ratio = chain.window.rate / passthrough.window.rate if chain.window and passthrough.window else None
    chain_rate = chain.window.rate if chain.window else None
    short = [r.label for r in (passthrough, chain) if r.window is None or r.window.seconds < MIN_WINDOW_S]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    delivery = config.get("pipeline", "delivery", "guarantee")
    interval = config.get("flink", "job_config").get("execution.checkpointing.interval", "?")
    fetch_ms = config.get("flink", "cluster_config").get("metrics.fetcher.update-interval", "10000")
    lines = results_file.heading(f"Span path throughput (`{job}`) against Flink's own passthrough", command) + [
        f"- Date: {now}",
        f"- Machine: {machine()}",
        f"- Versions: {versions(config, cluster)}",
        f"- Flink: the benchmark's standalone cluster ({cluster.rest_url}), parallelism "
        f"{config.get('flink', 'parallelism')}, live sources (not bounded), delivery {delivery}, checkpoints every "
        f"{interval}; one job at a time",
        f"- Kafka: one local KRaft broker ({config.bootstrap_servers}), every topic {PARTITIONS} partitions",
        f"- Input: {data.spans:,} spans in {data.messages:,} OTLP messages "
        f"({write_encoding(config.get('pipeline', 'spans', 'encoding'))}), {data.bytes:,} bytes (TraceGenerator seed {SEED}, "
        f"{TRACE_RATE:g} traces/s of event time, spans sorted by end time, at most 256 per message), message i "
        f"to partition i % {PARTITIONS}; verified before timing: every message acknowledged, and the topic's offsets "
        f"are 0 to {data.per_partition()}",
        "",
        "## Figures",
        "",
        f"Every {SAMPLE_EVERY_S:g} s the bench reads each source's per-partition Kafka offsets from Flink's REST API "
        f"(KafkaSourceReader `currentOffset`, at most `metrics.fetcher.update-interval` = {fetch_ms} ms old), takes the "
        "slowest source of the job per partition, and counts the spans of the messages read. The rate is "
        f"Δspans / Δt between the first and last sample from {WINDOW[0]:.0%} to {WINDOW[1]:.0%} of the input "
        "read; start-up and the tail are outside it. *Read* is from the first sample with spans read to the "
        "last; *load* the 1-minute load average at submission / when the input was read.",
        "",
        "| job | spans/s, steady state | window | samples | spans read in the window | read | load |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Ratio {job} / passthrough: " + (f"**{ratio:.2f}**." if ratio is not None else "n/a."),
        *([f"", f"**Too little work to measure**: {', '.join(short)} spent less than {MIN_WINDOW_S:g} s in the "
           "window; run with more --spans."] if short else []),
        "",
        "## Checks",
        "",
        "After each job was stopped with a savepoint, its outputs' committed records (read_committed: "
        "transaction markers are not records):",
        "",
        *(f"- {'ok' if ok else '**FAILED**'}: {what}" for what, ok in checks),
        "",
        f"Committed records on `{job}`'s topics: " + ", ".join(f"{role} {counts[role]:,}" for role in outputs) + ".",
        "",
        "## Against the issue's targets",
        "",
        f"- ≥ {TARGET_SPANS_PER_S:,} spans/s through `{job}`: "
        + (f"{chain_rate:,.0f}, {met(chain_rate >= TARGET_SPANS_PER_S)}." if chain_rate else "n/a."),
        f"- ≥ {TARGET_RATIO} of the passthrough: " + (f"{ratio:.2f}, {met(ratio >= TARGET_RATIO)}." if ratio else "n/a."),
    ]
    figures = {
        "spans": data.spans,
        "passthrough_spans_per_s": round(passthrough.window.rate) if passthrough.window else None,
        "chain_spans_per_s": round(chain_rate) if chain_rate else None,
        "ratio": round(ratio, 3) if ratio is not None else None,
        "command": command,
        "job": job,
        "messages": data.messages,
        "bytes": data.bytes,
        "date": now,
        "window": {"from": WINDOW[0], "to": WINDOW[1], "min_seconds": MIN_WINDOW_S, "too_little_work": short},
        "windows": {run.label: run.window.__dict__ if run.window else None for run in (passthrough, chain)},
        # (seconds since submission, spans read), every sample: how steady the steady state was.
        "samples": {run.label: [(round(t, 2), n) for t, n in run.samples] for run in (passthrough, chain)},
        "checks": [{"check": what, "ok": ok} for what, ok in checks],
    }
    return lines, figures


if __name__ == "__main__":
    main(sys.argv[1:])
