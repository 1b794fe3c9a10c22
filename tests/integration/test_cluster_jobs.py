"""A job with Python DataStream operators and keyed state (health: the breaker and retry decisions)
submitted to the standalone cluster, as users deploy it: the JobManager must load PyFlink's operators
and the TaskManager must run them in thread mode, with no Py4J gateway of a client beside it."""

from __future__ import annotations

import time

import pytest

from stormwatch.catalog import TOPIC_ROLES
from stormwatch.replay import produce
from stormwatch.traffic.generator import TraceGenerator, to_export_requests
from stormwatch.traffic.otlp import encode
from tests.conftest import read_topic, run_bounded, stormwatch
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration


def test_health_job_on_the_standalone_cluster_decides(config, topics_for, flink_cluster):
    names = topics_for(tuple(TOPIC_ROLES))
    spans = sorted((s for t in TraceGenerator(seed=5).generate(5.0, 150) for s in t), key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode(r) for r in to_export_requests(spans)], partition=0)
    run_bounded(names, ["flatten_spans"])

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
