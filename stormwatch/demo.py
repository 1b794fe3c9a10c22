"""The live demo: local Kafka, the jobs on the embedded Flink, generated AI-chain traffic, output live.

Everything it starts it stops again on Ctrl-C (or after --duration); a broker that was already
running is left running.
"""

from __future__ import annotations

import heapq
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from connectors.kafka import consumer, create_topics, producer
from stormwatch import catalog
from stormwatch.config import PROJECT_ROOT, Config
from stormwatch.runtime.kafka_broker import KafkaBroker
from stormwatch.traffic.generator import TraceGenerator, encode, to_export_requests

JOBS = ["flatten_spans"]
REFRESH_S = 2.0
# Every this many seconds the demo also sends a message that is not OTLP, to show the dead letters.
BAD_MESSAGE_EVERY_S = 15.0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run_demo(config: Config, rate: float, duration: float | None, seed: int) -> None:
    # Ctrl-C and `kill` both stop the demo cleanly, even where the shell started it with SIGINT ignored.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    broker = KafkaBroker(config)
    started_broker = broker.pid() is None
    say(broker.start())
    for line in create_topics(config):
        say(f"topic {line}")
    names = catalog.topics(config)
    jobs = [_start_job(config, job) for job in JOBS]
    stop = threading.Event()
    producer_thread = threading.Thread(
        target=_produce, args=(config, names["source"], rate, seed, stop), name="traffic", daemon=True
    )
    say(f"generating {rate:g} traces/s of gateway -> orchestrator -> llm-inference / retrieval / tool-runner "
        f"into {names['source']}; the embedded Flink job takes ~15 s to start")
    producer_thread.start()
    try:
        _show(config, names, stop, deadline=None if duration is None else time.monotonic() + duration)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        producer_thread.join(timeout=10)
        for job, proc in jobs:
            _stop_job(job, proc)
        if started_broker:
            say(broker.stop())


def say(text: str) -> None:
    print(f"[stormwatch] {text}", flush=True)


def _start_job(config: Config, job: str) -> tuple[str, subprocess.Popen]:
    log_dir = config.runtime_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / f"demo-{job}.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormwatch.cli", "--config", str(config.path), "run", job],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=PROJECT_ROOT,
        start_new_session=True,  # its own process group: the PyFlink gateway JVM stops with it
    )
    say(f"job {job} running on the embedded Flink (pid {proc.pid}, log {log_dir / f'demo-{job}.log'})")
    return job, proc


def _stop_job(job: str, proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    say(f"job {job} stopped")


def _produce(config: Config, topic: str, rate: float, seed: int, stop: threading.Event) -> None:
    """Traces in event time from now on; each span is sent once its end time has come, as an SDK's
    batch exporter would, so the stream is in end-time order like real traffic."""
    traces = TraceGenerator(seed=seed, start_unix_nano=time.time_ns()).generate(rate)
    upcoming = next(traces)
    ended: list[tuple[int, int, object]] = []  # heap of (end time, sequence, span)
    sequence = 0
    client = producer(config)
    last_bad = time.monotonic()
    try:
        while not stop.is_set():
            now = time.time_ns()
            while min(s.start_unix_nano for s in upcoming) <= now:
                for span in upcoming:
                    heapq.heappush(ended, (span.end_unix_nano, sequence, span))
                    sequence += 1
                upcoming = next(traces)
            due = []
            while ended and ended[0][0] <= now:
                due.append(heapq.heappop(ended)[2])
            for request in to_export_requests(due):
                client.send(topic, encode(request))
            if time.monotonic() - last_bad > BAD_MESSAGE_EVERY_S:
                client.send(topic, b'{"resourceSpans": "not a list"}')
                last_bad = time.monotonic()
            stop.wait(0.2)
        client.flush()
    finally:
        client.close()


@dataclass
class _Window:
    spans: int = 0
    errors: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    instances: set = field(default_factory=set)


def _show(config: Config, names: dict[str, str], stop: threading.Event, deadline: float | None) -> None:
    client = consumer(config, names["sink"], names["dead_letters"], auto_offset_reset="latest", consumer_timeout_ms=200)
    window: dict[str, _Window] = defaultdict(_Window)
    dead: list[str] = []
    total = 0
    next_refresh = time.monotonic() + REFRESH_S
    try:
        while deadline is None or time.monotonic() < deadline:
            for record in client:
                row = json.loads(record.value)
                if record.topic == names["dead_letters"]:
                    dead.append(f"{row['reason']} (offset {row['source_offset']})")
                    continue
                w = window[row["service_name"]]
                w.spans += 1
                w.errors += row["status_code"] == "STATUS_CODE_ERROR"
                w.total_ms += row["duration_ms"]
                w.max_ms = max(w.max_ms, row["duration_ms"])
                w.instances.add(row["service_instance_id"])
                if time.monotonic() >= next_refresh:
                    break
            if time.monotonic() >= next_refresh:
                total += sum(w.spans for w in window.values())
                _print_window(window, dead, total)
                window.clear()
                dead.clear()
                next_refresh = time.monotonic() + REFRESH_S
    finally:
        client.close()


def _print_window(window: dict[str, _Window], dead: list[str], total: int) -> None:
    if not window and not dead:
        say("waiting for flattened spans on Kafka ...")
        return
    lines = [f"--- last {REFRESH_S:g} s: {sum(w.spans for w in window.values())} spans "
             f"({total} since start), from stormwatch_spans ---",
             f"{'service':<16}{'instances':>10}{'spans':>8}{'errors':>8}{'mean ms':>10}{'max ms':>10}"]
    for service in sorted(window):
        w = window[service]
        lines.append(f"{service:<16}{len(w.instances):>10}{w.spans:>8}{w.errors:>8}"
                     f"{w.total_ms / w.spans:>10.1f}{w.max_ms:>10.1f}")
    lines += [f"dead letter: {reason}" for reason in dead]
    print("\n".join(lines), flush=True)
