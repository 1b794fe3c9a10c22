"""One service's decisions per window (stormwatch/scaling_control.py), as the scaling job calls it:
warm-up from each instance's first window, a front every window, a scaling decision when it changes,
sequence numbers per decision type, the envelope and the topics' schemas."""

from dataclasses import replace

from stormwatch.config import PROJECT_ROOT
from stormwatch.decisions import encode
from stormwatch.policy import load
from stormwatch.scaling_control import PARETO_FRONT, SCALING, observe
from tests.schemas import assert_valid

POLICY = load(PROJECT_ROOT / "config" / "policy.toml")
START = 1_767_225_600_000
SIZE_MS, SLIDE_MS = 30_000, 10_000


def window(i: int, latencies: dict[str, float], calls: int = 600) -> dict:
    """The i-th service window as jobs/scaling.py gathers it: the instance rows of one window."""
    start = START + i * SLIDE_MS
    rows = [{"service": "svc", "instance": name, "window_start_ms": start, "window_end_ms": start + SIZE_MS,
             "calls": calls, "errors": 0, "span_p99_ms": latency, "span_p95_ms": latency * 0.8}
            for name, latency in sorted(latencies.items())]
    return {"service": "svc", "window_start_ms": start, "window_end_ms": start + SIZE_MS, "instances": rows}


def run(observations):
    state, out = None, []
    for observation in observations:
        state, decisions = observe(state, observation, POLICY)
        out.append(decisions)
    return state, out


def test_a_front_every_window_a_scaling_decision_when_it_changes():
    steady = [window(i, {"svc-0": 100.0, "svc-1": 110.0}) for i in range(6)]
    _, out = run(steady)
    assert all([d["decision_type"] for d in decisions][0] == PARETO_FRONT for decisions in out)
    scaling = [d for decisions in out for d in decisions if d["decision_type"] == SCALING]
    assert scaling and scaling[0]["window_end_ms"] == steady[0]["window_end_ms"]
    assert len(scaling) < len(steady)            # a steady service is not re-announced every window
    fronts = [d for decisions in out for d in decisions if d["decision_type"] == PARETO_FRONT]
    assert [f["sequence"] for f in fronts] == list(range(1, len(steady) + 1))
    assert [s["sequence"] for s in scaling] == list(range(1, len(scaling) + 1))
    for d in fronts + scaling:
        assert d["entity"] == {"kind": "service", "key": "service:svc", "service": "svc"}
        assert d["policy_version"] == POLICY.version
    assert_valid("stormwatch_pareto_fronts", fronts)
    assert_valid("stormwatch_scaling_decisions", scaling)


def test_instances_warm_up_from_their_own_first_window():
    # Warm-up longer than a window, so an instance's first windows leave it out.
    policy = replace(POLICY, pareto=replace(POLICY.pareto, warmup_seconds=60))
    state, out = None, []
    for i in range(6):
        state, decisions = observe(state, window(i, {"svc-0": 100.0, **({"svc-1": 90.0} if i >= 2 else {})}), policy)
        front = next(d for d in decisions if d["decision_type"] == PARETO_FRONT)
        out.append({e["point"]["instance"]: e["reason"] for e in front["excluded"]})
    # Seen since the start of its first window: svc-0 from window 0, svc-1 (joined later) from window 2.
    assert state[0] == {"svc-0": START, "svc-1": START + 2 * SLIDE_MS}
    assert out[0] == {"svc-0": "WARMING_UP"}
    assert out[3] == {"svc-1": "WARMING_UP"}   # 30 + 3 * 10 s after svc-0's first window start
    assert out[5] == {}


def test_a_window_seen_twice_gives_a_front_but_no_second_scaling_decision():
    first = window(0, {"svc-0": 100.0})
    state, decisions = observe(None, first, POLICY)
    assert {d["decision_type"] for d in decisions} == {PARETO_FRONT, SCALING}
    _, again = observe(state, first, POLICY)
    assert [d["decision_type"] for d in again] == [PARETO_FRONT]
    assert again[0]["sequence"] == 2


def test_replaying_the_same_windows_gives_byte_identical_records():
    observations = [window(i, {"svc-0": 100.0 + 40 * i, "svc-1": 120.0}) for i in range(8)]
    encoded = [[encode(d) for d in decisions] for _, out in [run(observations), run(observations)] for decisions in out]
    assert encoded[:8] == encoded[8:]
