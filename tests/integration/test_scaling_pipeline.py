"""Pareto fronts and scaling decisions through the real Kafka and Flink: generated AI-chain traffic
through flatten_spans -> topology -> health -> scaling. llm-inference answers in seconds (per-token
decode) against the policy's 1000 ms SLO: saturated; retrieval answers in milliseconds: slack."""

from __future__ import annotations

import uuid

import pytest

from connectors.kafka import create_topics
from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import load as load_policy
from stormwatch.replay import produce
from stormwatch.traffic.generator import TraceGenerator, encode, to_export_requests
from tests.conftest import read_topic, run_bounded
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

ROLES = ("source", "sink", "dead_letters", "edges", "service_windows", "error_breaks", "latency_stages", "metrics",
         "instance_windows", "health", "breaker_decisions", "retry_decisions", "policy", "pareto_fronts",
         "scaling_decisions")
POLICY = load_policy(PROJECT_ROOT / "config" / "policy.toml")


@pytest.fixture(scope="module")
def decided(config, kafka, flink_cluster):
    suffix = uuid.uuid4().hex[:8]
    names = {role: f"test_{role}_{suffix}" for role in ROLES}
    create_topics(config, {name: {"partitions": 2} for name in names.values()})
    spans = sorted((s for t in TraceGenerator(seed=5).generate(5.0, 600) for s in t), key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode(r) for r in to_export_requests(spans)], partition=0)
    run_bounded(names, ["flatten_spans", "topology", "health", "scaling"])
    return {role: read_topic(config, names[role], 1, timeout=60) for role in ("pareto_fronts", "scaling_decisions")}


def _of(records: list[dict], service: str) -> list[dict]:
    return sorted((r for r in records if r["entity"]["key"] == f"service:{service}"), key=lambda r: r["sequence"])


def test_a_front_per_service_window_with_every_instance_accounted_for(decided):
    assert_valid("stormwatch_pareto_fronts", decided["pareto_fronts"])
    fronts = _of(decided["pareto_fronts"], "llm-inference")
    assert len({f["window_end_ms"] for f in fronts}) == len(fronts), "one front a window"
    assert any(f["front"] for f in fronts)
    # The first window (a partial one, and every instance still warming up) leaves every instance out.
    assert not fronts[0]["front"] and fronts[0]["excluded"]
    assert {e["reason"] for e in fronts[0]["excluded"]} <= {"TOO_FEW_CALLS", "WARMING_UP"}
    for f in fronts:
        instances = [p["instance"] for p in f["front"]] + [d["point"]["instance"] for d in f["dominated"]] + \
                    [e["point"]["instance"] for e in f["excluded"]]
        assert len(instances) == len(set(instances)) == f["counts"]["instances"]


def test_saturated_instances_scale_out(decided):
    assert_valid("stormwatch_scaling_decisions", decided["scaling_decisions"])
    decisions = _of(decided["scaling_decisions"], "llm-inference")
    out = [d for d in decisions if d["action"] == "scale_out"]
    assert out, [(d["action"], d["reason_code"]) for d in decisions]
    # Seconds of latency against a 1000 ms SLO ask for more replicas than one period's limit allows.
    assert out[0]["recommendation"]["reason_code"] == "SATURATED_SCALE_OUT"
    assert out[0]["reason_code"] in ("SATURATED_SCALE_OUT", "RATE_LIMITED")
    assert out[0]["desired_replicas"] > out[0]["previous_desired_replicas"]
    assert out[0]["metric"]["latency_ms"] > out[0]["target"]["slo_ms"]
    assert not [d for d in decisions if d["action"] == "scale_in"]


def test_slack_scales_in_only_after_the_stabilization_window(decided):
    fronts = _of(decided["pareto_fronts"], "retrieval")
    decisions = _of(decided["scaling_decisions"], "retrieval")
    scale_in = [d for d in decisions if d["action"] == "scale_in"]
    assert scale_in and scale_in[0]["reason_code"] == "SLACK_SCALE_IN", [(d["action"], d["reason_code"]) for d in decisions]
    first_ms = fronts[0]["window_end_ms"]
    assert scale_in[0]["window_end_ms"] - first_ms >= POLICY.scaling.scale_down_stabilization_seconds * 1000
    assert not [d for d in decisions if d["action"] == "scale_out"]
