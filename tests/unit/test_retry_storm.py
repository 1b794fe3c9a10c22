"""Retry storms per edge (stormwatch/retry_storm.py) and what they do to the edge's retry gate
(stormwatch/entity_control.py): on hand-made windows."""

from __future__ import annotations

import pickle

import pytest

from stormwatch.config import PROJECT_ROOT
from stormwatch.entity_control import EntityState, observe
from stormwatch.health import HealthInputs
from stormwatch.policy import PolicyError, from_document, load
from stormwatch.retry_storm import CALM, DEFAULTS, STORM, StormObservation, StormPolicy, step
from tests.schemas import assert_valid

POLICY = load(PROJECT_ROOT / "config" / "policy.toml")
START = 1_767_225_600_000


def obs(i: int, calls: int, retries: int, errors: int, p95: float = 100.0) -> StormObservation:
    return StormObservation(START + i * 10_000, calls, errors, retries, calls - retries, p95)


def run(observations, policy=POLICY.storm):
    state, steps = None, []
    for o in observations:
        s = step(state, o, policy)
        state = s.state
        steps.append(s)
    return steps


def test_amplification_while_the_callee_fails_starts_a_storm_and_calm_windows_end_it():
    steps = run([obs(0, 100, 0, 1), obs(1, 300, 150, 120), obs(2, 300, 150, 150),
                 obs(3, 110, 5, 2), obs(4, 100, 0, 0)])
    assert [s.state.state for s in steps] == [CALM, STORM, STORM, STORM, CALM]
    assert [s.reason_code for s in steps if s.changed] == ["STORM_STARTED", "STORM_ENDED"]
    started = steps[1]
    assert started.inputs["amplification"] == 2.0 and started.inputs["error_rate"] == 0.4
    assert started.state.since_ms == START + 10_000
    assert started.thresholds["start_amplification"] == POLICY.storm.start_amplification


def test_the_error_rate_is_capped_as_the_health_scores():
    # Failures on both sides of a call count twice in an edge's errors.
    [s] = run([obs(0, 100, 60, 180)])
    assert s.inputs["error_rate"] == 1.0 and s.state.state == STORM


def test_retries_of_a_healthy_callee_are_not_a_storm():
    # Hedged calls: many attempts, but the callee neither fails nor slows down.
    assert all(s.state.state == CALM for s in run([obs(0, 100, 0, 0), obs(1, 300, 150, 3, p95=110.0)]))


def test_a_slowdown_with_amplification_is_a_storm_without_errors():
    steps = run([obs(0, 100, 0, 0, p95=100.0), obs(1, 300, 150, 0, p95=250.0)])
    assert steps[1].state.state == STORM
    assert steps[1].thresholds["baseline_p95_ms"] == 100.0


def test_a_window_with_too_few_calls_changes_nothing():
    steps = run([obs(0, 300, 150, 120), obs(1, 5, 4, 5), obs(2, 5, 0, 0), obs(3, 5, 0, 0)])
    assert [s.state.state for s in steps] == [STORM] * 4


def test_hysteresis_between_start_and_end():
    # 1.3 is below the start (1.5) but not below the end (1.2): the storm goes on.
    steps = run([obs(0, 300, 150, 120), obs(1, 130, 30, 20), obs(2, 130, 30, 20), obs(3, 130, 30, 20)])
    assert [s.state.state for s in steps] == [STORM] * 4


def test_the_policy_section_is_validated_and_optional():
    assert StormPolicy.from_dict(None) == StormPolicy.from_dict(DEFAULTS) == POLICY.storm
    raw = {k: v for k, v in POLICY.raw.items() if k != "storm"}
    assert from_document(raw).storm == POLICY.storm
    with pytest.raises(PolicyError, match="storm.end_amplification"):
        from_document({**POLICY.raw, "storm": {**DEFAULTS, "end_amplification": 2.0}})
    with pytest.raises(PolicyError, match="storm.typo"):
        from_document({**POLICY.raw, "storm": {**DEFAULTS, "typo": 1}})


def edge_window(i: int, calls: int, retries: int, errors: int, p95: float = 100.0) -> HealthInputs:
    end = START + 30_000 + i * 10_000
    return HealthInputs(entity_kind="edge", entity_key="edge:orchestrator->llm-inference", service="llm-inference",
                        instance=None, caller="orchestrator", callee="llm-inference", window_start_ms=end - 30_000,
                        window_end_ms=end, calls=calls, errors=errors, p50_ms=50.0, p95_ms=p95, p99_ms=p95 * 1.2,
                        retries=retries, logical_calls=calls - retries)


def decide(windows):
    state, out = None, []
    for w in windows:
        state, decisions = observe(state, w, POLICY)
        out.append(decisions)
    return state, out


def test_an_edge_in_a_storm_publishes_it_and_its_retry_gate_tightens_by_the_amplification():
    # 15 % errors keep the breaker closed; the retries double the calls.
    state, out = decide([edge_window(0, 200, 0, 1), edge_window(1, 400, 200, 60)])
    storms = [d for d in out[1] if d["decision_type"] == "retry_storm"]
    assert len(storms) == 1
    assert_valid("stormwatch_storm_decisions", storms)
    assert storms[0]["state"] == STORM and storms[0]["reason_code"] == "STORM_STARTED"
    assert storms[0]["inputs"]["amplification"] == 2.0 and storms[0]["ended_ms"] is None
    [breaker] = [d for d in out[1] if d["decision_type"] == "breaker"] or [None]
    assert breaker is None or breaker["state"] == "CLOSED"
    [gate] = [d for d in out[1] if d["decision_type"] == "retry_gate"]
    assert_valid("stormwatch_retry_decisions", [gate])
    assert gate["reason_code"] == "RETRY_STORM" and gate["max_retries"] <= 1
    budget = int((POLICY.retry.budget_ratio * 400 + POLICY.retry.min_retries_per_second * 30) // 2.0)
    assert gate["budget_retries"] == budget and gate["thresholds"]["storm_amplification"] == 2.0
    assert state.storm.state == STORM


def test_the_storm_ends_with_its_start_and_end_and_the_gate_loosens_again():
    _, out = decide([edge_window(0, 200, 0, 1), edge_window(1, 400, 200, 60),
                     edge_window(2, 200, 2, 0), edge_window(3, 200, 0, 0)])
    ended = [d for d in out[3] if d["decision_type"] == "retry_storm"]
    assert [(d["state"], d["reason_code"]) for d in ended] == [(CALM, "STORM_ENDED")]
    assert ended[0]["started_ms"] == START + 40_000 and ended[0]["ended_ms"] == START + 60_000
    [gate] = [d for d in out[3] if d["decision_type"] == "retry_gate"]
    assert gate["reason_code"] != "RETRY_STORM" and "storm_amplification" not in gate["thresholds"]


def test_services_and_instances_have_no_storm_and_old_state_reads_as_calm():
    service = HealthInputs(entity_kind="service", entity_key="service:cart", service="cart", instance=None,
                           caller=None, callee=None, window_start_ms=START, window_end_ms=START + 30_000,
                           calls=100, errors=50, p95_ms=100.0)
    state, decisions = observe(None, service, POLICY)
    assert state.storm is None and all(d["decision_type"] != "retry_storm" for d in decisions)
    # Entity state saved by the version before storms (no `storm` attribute) still steps.
    old = EntityState()
    del old.storm
    restored = pickle.loads(pickle.dumps(old))
    state, _ = observe(restored, edge_window(0, 200, 0, 1), POLICY)
    assert state.storm.state == CALM
