"""A job with Python DataStream operators and keyed state (health: the breaker and retry decisions)
submitted to the standalone cluster, as users deploy it: the JobManager must load PyFlink's operators
and the TaskManager must run them in thread mode, with no Py4J gateway of a client beside it."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from connectors.otlp import encode_json
from stormwatch.catalog import TOPIC_ROLES
from stormwatch.replay import produce
from stormwatch.traffic.generator import TraceGenerator
from stormwatch.traffic.otlp import to_export_requests
from tests.conftest import read_topic, run_bounded, stormwatch
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration


def test_health_job_on_the_standalone_cluster_decides(config, topics_for, flink_cluster):
    names = topics_for(tuple(TOPIC_ROLES))
    spans = sorted((s for t in TraceGenerator(seed=5).generate(5.0, 150) for s in t), key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode_json(r) for r in to_export_requests(spans)], partition=0)
    run_bounded(names, ["spans"])  # health reads the span path's per-instance figures

    result = stormwatch("run", "health", "--cluster", "--", "--bounded", "--group-id", f"health-{names['source']}",
                        *[f"--topic={role}={name}" for role, name in names.items()])
    assert result.returncode == 0, result.stderr[-3000:]
    job_id = result.stdout.split()[-1]
    deadline = time.monotonic() + 300
    while (state := next(j["state"] for j in flink_cluster.jobs() if j["jid"] == job_id)) not in (
            "FINISHED", "FAILED", "CANCELED") and time.monotonic() < deadline:
        time.sleep(2)
    assert state == "FINISHED"

    health = read_topic(config, names["health"], 1, timeout=60)
    assert_valid("stormwatch_health", health)
    assert {r["entity"]["key"] for r in health} >= {"service:gateway", "service:llm-inference"}
    assert_valid("stormwatch_breaker_decisions", read_topic(config, names["breaker_decisions"], 1, timeout=30))


def _prometheus_pages(config) -> list[str]:
    """What each process of the cluster exposes to a Prometheus scrape (JobManager, TaskManagers)."""
    first, last = map(int, str(config.get("flink", "cluster_config", "metrics.reporter.prom.port")).split("-"))
    pages = []
    for port in range(first, last + 1):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                pages.append(response.read().decode())
        except OSError:
            continue
    return pages


def _dead_letters_counted(pages: list[str]) -> float:
    """Records into the dead-letter sinks' writers (not their committers, which count transactions):
    the job's count of bad messages."""
    pattern = re.compile(r'^flink_taskmanager_job_task_operator_numRecordsIn\{[^}]*operator_name="[^"]*dead_letters[^"]*_Writer"[^}]*\} (\S+)$',
                         re.MULTILINE)
    return sum(float(v) for page in pages for v in pattern.findall(page))


def test_the_cluster_exposes_flink_metrics_to_prometheus_and_counts_dead_letters(config, topics, flink_cluster):
    result = stormwatch("run", "flatten_spans", "--cluster", "--", "--group-id", f"g-{topics['source']}",
                        *[f"--topic={role}={name}" for role, name in topics.items()])
    assert result.returncode == 0, result.stderr[-3000:]
    job_id = result.stdout.split()[-1]
    try:
        produce(config, topics["source"], [b"not json", b'{"resourceSpans": 1}', b"[]"])
        assert len(read_topic(config, topics["dead_letters"], 3)) == 3
        deadline = time.monotonic() + 120  # the reporter shows counters as of its last update
        while (counted := _dead_letters_counted(_prometheus_pages(config))) < 3 and time.monotonic() < deadline:
            time.sleep(2)
        assert counted == 3
        pages = _prometheus_pages(config)
        for metric in ("flink_jobmanager_numRunningJobs", "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
                       "flink_taskmanager_job_task_operator_numRecordsOut"):
            assert any(metric in page for page in pages), metric
    finally:
        flink_cluster.cancel(job_id)
