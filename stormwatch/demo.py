"""The live demo: local Kafka, every job on the embedded Flink, generated AI-chain traffic with a fault
schedule, and what the jobs decide shown live in the terminal and on a local web page.

Everything it starts it stops again on Ctrl-C (or after --duration); a broker that was already
running is left running.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from connectors.kafka import consumer, create_topics
from stormwatch import catalog, job_registry
from stormwatch.config import PROJECT_ROOT, Config
from stormwatch.dashboard import DIM, DashboardState, Style, page, text_table
from stormwatch.policy import default_file
from stormwatch.policy import load as load_policy
from stormwatch.replay import DeliveryError, send
from stormwatch.runtime.kafka_broker import KafkaBroker
from stormwatch.runtime.processes import stop_group
from stormwatch.tail_format import format_record
from stormwatch.traffic.schedule import Schedule, load_schedule
from stormwatch.traffic.send import generate

# The outputs the demo watches, by topic role (catalog.TOPIC_ROLES).
WATCHED = ["span_instances", "dead_letters", "topology_snapshots", "suspects", "health", "breaker_decisions",
           "retry_decisions", "storm_decisions", "pareto_fronts", "scaling_decisions"]
WAITING_EVERY_S = 5.0
# Every this many seconds the demo also sends a message that is not OTLP, to show the dead letters.
BAD_MESSAGE_EVERY_S = 15.0
# The jobs the first table needs; the others start once it is shown, or this long after the traffic starts.
FIRST_TABLE_JOBS = ("spans", "health")
LATER_JOBS_AFTER_S = 60.0


def _interrupt(signum, frame):
    # The first Ctrl-C or `kill` stops the demo; one more while it stops its jobs and broker (a second
    # Ctrl-C, `timeout` signalling both make and its process group) must not cut that short.
    signal.signal(signal.SIGINT, _stopping)
    signal.signal(signal.SIGTERM, _stopping)
    raise KeyboardInterrupt


def _stopping(signum, frame):
    say("stopping: the jobs and the broker are being stopped, please wait")


def run_demo(config: Config, rate: float, duration: float | None, seed: int, schedule_spec: str,
             resume: bool = False) -> None:
    # Ctrl-C and `kill` both stop the demo cleanly, even where the shell started it with SIGINT ignored.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    # Runs never mix: the jobs read what is written from now on (Kafka record timestamps), not what an
    # earlier run left in the topics and their consumer groups, unless asked to resume.
    since_ms = int(time.time() * 1000)
    job_args = [] if resume else ["--from-timestamp", str(since_ms)]
    schedule = load_schedule(schedule_spec)
    style = Style.of(load_policy(default_file(config)), colour=sys.stdout.isatty())
    broker = KafkaBroker(config)
    started_broker = broker.pid() is None
    jobs: list[tuple[str, subprocess.Popen]] = []
    threads: list[threading.Thread] = []
    stop, reading = threading.Event(), threading.Event()
    server = None
    try:
        say(broker.start())
        for line in create_topics(config):
            say(f"topic {line}")
        names = catalog.topics(config)
        job_config = _job_config(config)
        say(_reading_from(since_ms, resume))
        # The jobs the first table needs (the span path and health) start first, the rest (scaling) once
        # it is shown, or LATER_JOBS_AFTER_S after the traffic starts: three embedded Flink processes
        # starting at once on two cores took 52 s before the span path read, health the longest of them
        # (bench/results/demo_first_table.md). A later job reads its inputs from where its consumer group
        # left off (the topics' start on a fresh machine).
        later = [job for job in job_registry.CHAIN if job not in FIRST_TABLE_JOBS]
        for job in job_registry.CHAIN:
            if job not in later:
                jobs.append(_start_job(config, job_config, job, job_args))
        traffic_since: float | None = None

        def advance(table_shown: bool) -> None:
            nonlocal traffic_since
            if not later or not reading.is_set():
                return
            if traffic_since is None:
                traffic_since = time.monotonic()
            if table_shown or time.monotonic() - traffic_since >= LATER_JOBS_AFTER_S:
                while later:
                    jobs.append(_start_job(config, job_config, later.pop(0), job_args))

        state, lock = DashboardState(), threading.Lock()
        server = _serve_page(config, state, lock, style)
        threads = [
            threading.Thread(target=_traffic_once_reading, name="traffic", daemon=True,
                             args=(config, schedule, rate, seed, reading, stop)),
            threading.Thread(target=_send_bad_messages, name="bad-messages", daemon=True,
                             args=(config, names["source"], stop)),
        ]
        say(f"generating {rate:g} traces/s of gateway -> orchestrator -> llm-inference / retrieval / tool-runner, "
            f"with per-instance metrics, into {names['source']} and {names['metrics']}")
        say(f"fault schedule {schedule.name}: {' '.join(schedule.description.split())}")
        say(f"the page: http://127.0.0.1:{server.server_address[1]}/ (service graph, breakers, fronts)")
        say("the span path and health start first, the traffic once the span path reads, scaling after the "
            "first health table; windows close a slide after their end")
        for thread in threads:
            thread.start()
        _show(config, names, state, lock, style, reading, advance,
              deadline=None if duration is None else time.monotonic() + duration)
    except KeyboardInterrupt:
        pass
    finally:
        # From here on a signal only says that the demo is stopping (whether it came as the first or not).
        signal.signal(signal.SIGINT, _stopping)
        signal.signal(signal.SIGTERM, _stopping)
        stop.set()
        for thread in threads:
            if thread.ident is not None:  # started
                thread.join(timeout=10)
        if server is not None:
            server.shutdown()
        for job, proc in jobs:
            _stop_job(job, proc)
        if started_broker:
            say(broker.stop())


def say(text: str) -> None:
    print(f"[stormwatch] {text}", flush=True)


def _job_config(config: Config) -> Path:
    """The configuration the demo's jobs run with: the user's, at [demo] job_parallelism, since three
    embedded jobs share the machine's cores and the demo's traffic is small, and with the health job's
    idle timeout at [demo] health_idle_timeout_seconds (the demo sends no OTLP metrics)."""
    path = config.runtime_dir / "demo-jobs.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"base = {json.dumps(str(config.path))}\n[flink]\n"
                    f"parallelism = {int(config.get('demo', 'job_parallelism'))}\n"
                    f"[pipeline.health]\n"
                    f"idle_timeout_seconds = {int(config.get('demo', 'health_idle_timeout_seconds'))}\n")
    return path


def _reading_from(since_ms: int, resume: bool) -> str:
    if resume:
        return ("resuming: the jobs continue from where their consumer groups left off, so records of earlier "
                "runs still in the topics are read (and decided on) first")
    clock = time.strftime("%H:%M:%S", time.gmtime(since_ms / 1000))
    return (f"a fresh run: the jobs read what is written from {clock} UTC on; records of earlier runs stay in "
            f"the topics unread (--resume continues from the jobs' consumer groups instead)")


def _start_job(config: Config, job_config: Path, job: str, job_args: list[str]) -> tuple[str, subprocess.Popen]:
    log_dir = config.runtime_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / f"demo-{job}.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormwatch.cli", "--config", str(job_config), "run", job,
         *(["--", *job_args] if job_args else [])],
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
        stop_group(proc, signal.SIGTERM, timeout=20)
    say(f"job {job} stopped")


def _traffic_once_reading(config: Config, schedule: Schedule, rate: float, seed: int, reading: threading.Event,
                             stop: threading.Event) -> None:
    """Live traffic from the moment the span path reads. Traffic sent while the jobs start would be a
    backlog, read from the topic's partitions at different speeds, and the spans it writes out of
    event-time order would be late for the next jobs' watermark."""
    while not reading.wait(1.0):
        if stop.is_set():
            return
    say("the span path reads (a bad message reached the dead letters): the traffic starts now")
    try:
        generate(config, schedule, rate, None, seed, stop=stop)
    except DeliveryError as e:
        say(f"the traffic stopped: {e}")


def _send_bad_messages(config: Config, topic: str, stop: threading.Event) -> None:
    """A message that is not OTLP now and every BAD_MESSAGE_EVERY_S: its dead letter also shows that
    the span path is reading."""
    def every_interval():
        while True:
            yield topic, None, b'{"resourceSpans": "not a list"}'
            if stop.wait(BAD_MESSAGE_EVERY_S):
                return

    try:
        send(config, every_interval(), {topic})
    except DeliveryError as e:
        say(f"the bad messages stopped: {e}")


def _serve_page(config: Config, state: DashboardState, lock: threading.Lock, style: Style) -> ThreadingHTTPServer:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path not in ("/", "/index.html"):
                self.send_error(404)
                return
            with lock:
                body = page(state, style).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # the terminal shows decisions, not requests
            pass

    server = ThreadingHTTPServer(("127.0.0.1", int(config.get("demo", "dashboard_port"))), Page)
    threading.Thread(target=server.serve_forever, name="page", daemon=True).start()
    return server


def _news(role: str, record: dict) -> bool:
    """Whether a record is a change worth a line of its own between the tables."""
    if role == "breaker_decisions":
        return record.get("state") != record.get("previous_state")
    if role == "scaling_decisions":
        # A change, or one the service's breaker held or revoked (coordination): the storm's scale-out not made.
        coordination = record.get("coordination") or {}
        return record.get("action") != "hold" or bool(coordination.get("held") or coordination.get("revoked"))
    if role == "suspects":
        return bool(record.get("flagged"))
    # Retry gates and storms are published only when they change.
    return role in ("retry_decisions", "storm_decisions")


def _take(role: str, value: bytes, state: DashboardState, lock: threading.Lock, dead: Counter, style: Style) -> int:
    """Fold one record into the state, print it if it is news; the SERVER calls the span path counted."""
    try:
        record = json.loads(value)
    except ValueError:
        return 0
    if role == "span_instances":
        return int(record.get("calls", 0))
    with lock:
        state.update(role, record)
    if role == "dead_letters":
        dead[str(record.get("reason", "?")).split(":")[0]] += 1
    elif _news(role, record):
        print(format_record(record, style), flush=True)
    return 0


def _show(config: Config, names: dict[str, str], state: DashboardState, lock: threading.Lock, style: Style,
          reading: threading.Event, advance: Callable[[bool], None], deadline: float | None) -> None:
    roles = {names[role]: role for role in WATCHED}
    client = consumer(config, *roles, auto_offset_reset="latest", consumer_timeout_ms=200)
    spans, shown_window, next_waiting = 0, 0, time.monotonic()
    dead: Counter[str] = Counter()  # reasons since the last table: late spans can come in thousands
    try:
        while deadline is None or time.monotonic() < deadline:
            look_up = time.monotonic() + 1.0  # spans never pause for the consumer timeout: look up each second
            for message in client:
                role = roles[message.topic]
                if role == "dead_letters":
                    reading.set()
                spans += _take(role, message.value, state, lock, dead, style)
                if time.monotonic() >= look_up:
                    break
            with lock:
                window = max((r["window_end_ms"] for r in state.health.values()), default=0)
                table = text_table(state, style) if window > shown_window else None
            if table:
                shown_window = window
                clock = time.strftime("%H:%M:%S", time.gmtime(window / 1000))
                print(f"--- health window ending {clock} UTC; {spans} SERVER calls traced so far ---\n{table}", flush=True)
            advance(shown_window > 0)
            if dead and (table or not shown_window):
                print("\n".join(style.paint(f"dead letter: {reason} x{n}", DIM) for reason, n in sorted(dead.items())),
                      flush=True)
                dead.clear()
            elif not shown_window and time.monotonic() >= next_waiting:
                say(f"waiting for the first health window: {spans} SERVER calls traced so far ...")
                next_waiting = time.monotonic() + WAITING_EVERY_S
    finally:
        client.close()
