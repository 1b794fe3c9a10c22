"""One real Kafka broker and one real Flink cluster per test session, on the test configuration's
own ports (tests/stormwatch-test.toml), so a demo running from the same checkout is never touched.
$STORMWATCH_TEST_CONFIG names another one (its own ports and runtime_dir, `base` on the test file) so
two test sessions can run side by side."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

TEST_CONFIG = Path(os.environ.get("STORMWATCH_TEST_CONFIG") or Path(__file__).parent / "stormwatch-test.toml").resolve()
os.environ["STORMWATCH_CONFIG"] = str(TEST_CONFIG)

from connectors.kafka import consumer, create_topics  # noqa: E402
from stormwatch.config import PROJECT_ROOT, load  # noqa: E402
from stormwatch.runtime.flink_cluster import FlinkCluster  # noqa: E402
from stormwatch.runtime.kafka_broker import KafkaBroker  # noqa: E402


@pytest.fixture(scope="session")
def config():
    return load(TEST_CONFIG)


@pytest.fixture(scope="session")
def kafka(config):
    broker = KafkaBroker(config)
    started = broker.pid() is None
    broker.start()
    yield broker
    if started:
        broker.stop()


@pytest.fixture(scope="module")
def flink_cluster(config, kafka):
    cluster = FlinkCluster(config)
    cluster.start()
    yield cluster
    cluster.stop()


# Every topic the span path (jobs/spans.py) reads or writes, by role: a test that runs it gives each its
# own topic, so nothing it writes lands in (or waits for) the configured default topics.
SPAN_PATH_ROLES = ("source", "sink", "dead_letters", "edges", "service_windows", "error_breaks", "latency_stages",
                   "span_instances", "suspects", "topology_snapshots", "edge_events")


def new_topics(config, roles) -> dict[str, str]:
    """Fresh topics of 2 partitions: {role: name} for the roles asked for."""
    suffix = uuid.uuid4().hex[:8]
    names = {role: f"test_{role}_{suffix}" for role in roles}
    create_topics(config, {name: {"partitions": 2} for name in names.values()})
    return names


@pytest.fixture
def topics_for(config, kafka):
    """new_topics for one test (a module's fixture, which cannot use this one, calls new_topics)."""
    return lambda roles: new_topics(config, roles)


@pytest.fixture
def topics(topics_for):
    return topics_for(("source", "sink", "dead_letters"))


def read_topic(config, topic: str, expected: int, timeout: float = 120.0) -> list[dict]:
    """Records of `topic` as JSON, read until `expected` of them arrived (or the timeout)."""
    client = consumer(config, topic, consumer_timeout_ms=1000)
    records: list[dict] = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < expected and time.monotonic() < deadline:
            for message in client:
                records.append({"key": message.key, **json.loads(message.value)})
                if len(records) >= expected:
                    break
        # Nothing beyond what was expected: a duplicate or a stray record is a failure too.
        records.extend({"key": m.key, **json.loads(m.value)} for m in client)
    finally:
        client.close()
    return records


def stormwatch(*args: str, timeout: float = 300.0, config: Path = TEST_CONFIG) -> subprocess.CompletedProcess:
    """Run the CLI as a user would, in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "stormwatch.cli", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=PROJECT_ROOT,
    )


@contextmanager
def live_job(job: str, names: dict[str, str], *args: str):
    """`stormwatch run JOB` streaming over the topics `names` ({role: name}) for the with-block, then
    killed with its process group (the PyFlink gateway JVM with it). Late input needs a live job: only
    a running job has closed windows to be late for."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormwatch.cli", "--config", str(TEST_CONFIG), "run", job, "--", *args,
         *[f"--topic={role}={name}" for role, name in names.items()]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=PROJECT_ROOT,
    )
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def sql_client(names: dict[str, str], folder: Path, statements: str) -> subprocess.CompletedProcess:
    """`stormwatch sql` over the topics `names` ({role: name}), running `statements` from a file."""
    query = folder / "query.sql"
    query.write_text(statements)
    return stormwatch("sql", *[f"--topic={role}={name}" for role, name in names.items()], "--file", str(query))


def run_bounded(names: dict[str, str], jobs: list[str], config: Path = TEST_CONFIG) -> None:
    """Run `jobs` one after another as bounded replays over the topics `names` ({role: name}), each
    with its own consumer group, as a chain would run live; `config`: another configuration file."""
    args = ["--bounded", *[f"--topic={role}={name}" for role, name in names.items()]]
    for job in jobs:
        result = stormwatch("run", job, "--", "--group-id", f"{job}-{names['source']}", *args, timeout=900,
                            config=config)
        assert result.returncode == 0, result.stderr[-3000:]
