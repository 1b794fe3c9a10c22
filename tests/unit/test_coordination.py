"""Scaling coordinated with the service's circuit breaker (stormwatch/coordination.py, issue 21 item 3):
no scale-out while the breaker lets no call through unless the service is saturated without errors, no
scale-in while it is not CLOSED, and every decision names the breaker decision it took into account."""

from dataclasses import replace

import pytest

from stormwatch import coordination
from stormwatch.config import PROJECT_ROOT
from stormwatch.decisions import decision_id, encode
from stormwatch.policy import load
from stormwatch.scaling import ScalingPolicy
from stormwatch.scaling_control import SCALING, observe
from tests.schemas import assert_valid

POLICY = load(PROJECT_ROOT / "config" / "policy.toml")
START = 1_767_225_600_000
SIZE_MS, SLIDE_MS = 30_000, 10_000
SLO = POLICY.scaling.slo_for("svc")


def end_of(i: int) -> int:
    return START + i * SLIDE_MS + SIZE_MS


def breaker(state: str, i: int, enforced: bool = True) -> dict:
    """The svc breaker's decision of window i, as coordination.breaker_of reads it off the topic."""
    return coordination.breaker_of({
        "decision_id": decision_id("service:svc", "breaker", end_of(i), POLICY.version), "state": state,
        "window_end_ms": end_of(i), "enforced": enforced, "decision_type": "breaker"})


def window(i: int, latency: float, error_rate: float = 0.0, brk: dict | None = None, calls: int = 600) -> dict:
    """The i-th window of svc's three instances, with the breaker as of its end (as jobs/scaling.py)."""
    start = START + i * SLIDE_MS
    rows = [{"service": "svc", "instance": f"svc-{k}", "window_start_ms": start, "window_end_ms": start + SIZE_MS,
             "calls": calls, "errors": round(calls * error_rate), "span_p99_ms": latency, "span_p95_ms": latency}
            for k in range(3)]
    return {"service": "svc", "window_start_ms": start, "window_end_ms": start + SIZE_MS, "instances": rows,
            "breaker": brk}


def run(observations, policy=POLICY):
    state, scaling = None, []
    for observation in observations:
        state, decisions = observe(state, observation, policy)
        scaling += [d for d in decisions if d["decision_type"] == SCALING]
    return state, scaling


# Warm-up (pareto.warmup_seconds) leaves every instance out of the first windows: decide after it.
WARM = 4


def warmed(latency: float, error_rate: float = 0.0, brk=None) -> list[dict]:
    return [window(i, latency, error_rate, brk) for i in range(WARM)]


@pytest.mark.parametrize("state", ["OPEN", "HALF_OPEN", "FORCED_OPEN"])
def test_no_scale_out_while_the_breaker_lets_no_call_through(state):
    opened = breaker(state, 0)
    _, decisions = run(warmed(3000.0, 0.5, opened))
    assert_valid("stormwatch_scaling_decisions", decisions)
    assert not [d for d in decisions if d["action"] == "scale_out"], [(d["action"], d["reason_code"]) for d in decisions]
    held = [d for d in decisions if d["reason_code"] == "BREAKER_OPEN"]
    assert held and held[0]["action"] == "hold"
    assert held[0]["desired_replicas"] == held[0]["previous_desired_replicas"] == 3
    # The signal still says what the front asks for; the hold names the breaker decision that caused it.
    assert held[0]["recommendation"]["reason_code"] == "SATURATED_SCALE_OUT"
    block = held[0]["coordination"]
    assert block["held"] == {"reason_code": "BREAKER_OPEN", "decision_id": opened["decision_id"],
                             "action": "scale_out", "desired_replicas": block["held"]["desired_replicas"]}
    assert block["held"]["desired_replicas"] > 3
    assert block["decisions"] == [{"decision_type": "breaker", **opened}]
    assert block["saturation"] == {"saturated": True, "error_rate": 0.5,
                                   "max_error_rate": POLICY.scaling.saturation_max_error_rate, "without_errors": False}


def test_saturation_without_errors_still_scales_out_while_the_breaker_is_open():
    opened = breaker("OPEN", 0)
    _, decisions = run(warmed(3000.0, 0.0, opened))
    out = [d for d in decisions if d["action"] == "scale_out"]
    assert out and out[0]["desired_replicas"] > 3
    assert out[0]["coordination"]["held"] is None
    assert out[0]["coordination"]["saturation"]["without_errors"] is True
    assert out[0]["coordination"]["decisions"][0]["decision_id"] == opened["decision_id"]


def test_the_error_rate_limit_is_the_policys():
    opened = breaker("OPEN", 0)
    # 4 % errors: within the default 5 %, so saturation; under a policy allowing 1 %, a failing service.
    _, allowed = run(warmed(3000.0, 0.04, opened))
    assert [d for d in allowed if d["action"] == "scale_out"]
    strict = replace(POLICY, scaling=replace(POLICY.scaling, saturation_max_error_rate=0.01))
    _, held = run(warmed(3000.0, 0.04, opened), strict)
    assert not [d for d in held if d["action"] == "scale_out"]
    assert {d["reason_code"] for d in held} >= {"BREAKER_OPEN"}
    assert held[-1]["coordination"]["saturation"]["max_error_rate"] == 0.01


def test_a_closed_breaker_or_none_holds_nothing_and_a_scale_out_follows_once_it_closes():
    _, unknown = run(warmed(3000.0, 0.5))
    assert [d for d in unknown if d["action"] == "scale_out"]
    opened, closed = breaker("OPEN", 0), breaker("CLOSED", WARM)
    windows = warmed(3000.0, 0.5, opened) + [window(WARM + k, 3000.0, 0.5, closed) for k in range(2)]
    _, decisions = run(windows)
    out = [d for d in decisions if d["action"] == "scale_out"]
    assert out and out[0]["window_end_ms"] == end_of(WARM), [(d["window_end_ms"], d["reason_code"]) for d in decisions]
    assert out[0]["coordination"]["decisions"][0]["state"] == "CLOSED" and out[0]["coordination"]["held"] is None
    # A held scale-out was no change: the rate limit's period starts at the held count.
    assert out[0]["previous_desired_replicas"] == 3 and out[0]["rate_limit"]["period_start_replicas"] == 3


def test_a_dry_run_breaker_is_listed_but_holds_nothing():
    dry = breaker("OPEN", 0, enforced=False)
    _, decisions = run(warmed(3000.0, 0.5, dry))
    out = [d for d in decisions if d["action"] == "scale_out"]
    assert out and out[0]["coordination"]["decisions"] == [{"decision_type": "breaker", **dry}]


def slack_run(brk_of) -> list[dict]:
    """svc slack (50 ms against a 1000 ms SLO) long past the scale-down stabilization window, the breaker
    as of each window given by brk_of(i)."""
    count = WARM + int(POLICY.scaling.scale_down_stabilization_seconds * 1000 / SLIDE_MS) + 6
    return run([window(i, 50.0, 0.0, brk_of(i)) for i in range(count)])[1]


def test_slack_scales_in_with_the_breaker_closed_or_disabled():
    for brk in (None, breaker("CLOSED", 0), breaker("DISABLED", 0)):
        decisions = slack_run(lambda i, b=brk: b)
        assert [d for d in decisions if d["action"] == "scale_in"], brk


@pytest.mark.parametrize("state", ["HALF_OPEN", "GRADUAL_RECOVERY", "OPEN", "FORCED_OPEN"])
def test_scale_in_is_held_while_the_breaker_is_not_closed(state):
    recovering = breaker(state, 0)
    decisions = slack_run(lambda i: recovering)
    assert_valid("stormwatch_scaling_decisions", decisions)
    assert not [d for d in decisions if d["action"] == "scale_in"]
    held = [d for d in decisions if d["reason_code"] == "BREAKER_RECOVERING"]
    assert held and held[0]["coordination"]["held"]["decision_id"] == recovering["decision_id"]
    assert held[0]["coordination"]["held"]["action"] == "scale_in"
    assert held[0]["recommendation"]["reason_code"] == "SLACK_SCALE_IN"


def test_the_ramp_and_a_scale_in_never_share_a_window():
    # HALF_OPEN, then the ramp, then CLOSED at window 36: the scale-in waits for CLOSED.
    states = {0: breaker("HALF_OPEN", 0), 20: breaker("GRADUAL_RECOVERY", 20), 36: breaker("CLOSED", 36)}

    def as_of(i):
        return coordination.as_of(tuple((end_of(k), b) for k, b in sorted(states.items())), end_of(i))

    decisions = slack_run(as_of)
    scale_in = [d for d in decisions if d["action"] == "scale_in"]
    assert scale_in and scale_in[0]["window_end_ms"] == end_of(36), [(d["window_end_ms"], d["reason_code"]) for d in decisions]
    assert scale_in[0]["coordination"]["decisions"][0]["decision_id"] == states[36]["decision_id"]


def test_the_breaker_as_of_a_window_end():
    timeline = None
    for i, state in ((3, "OPEN"), (0, "CLOSED"), (6, "HALF_OPEN")):     # out of order on purpose
        timeline = coordination.record(timeline, breaker(state, i))
    assert [t for t, _ in timeline] == [end_of(0), end_of(3), end_of(6)]
    assert coordination.as_of(timeline, end_of(0) - 1) is None
    assert coordination.as_of(timeline, end_of(3))["state"] == "OPEN"      # the window's own decision counts
    assert coordination.as_of(timeline, end_of(5))["state"] == "OPEN"
    assert coordination.as_of(timeline, end_of(9))["state"] == "HALF_OPEN"
    # A repeat of a window (a replay) replaces it; forgetting keeps the newest at or before the watermark.
    again = coordination.record(timeline, breaker("FORCED_OPEN", 3))
    assert len(again) == 3 and coordination.as_of(again, end_of(4))["state"] == "FORCED_OPEN"
    kept = coordination.forget_before(timeline, end_of(4))
    assert [t for t, _ in kept] == [end_of(3), end_of(6)]
    assert coordination.forget_before(timeline, end_of(0) - 1) == timeline


def test_the_error_rate_of_a_window():
    assert coordination.error_rate([{"calls": 90, "errors": 9}, {"calls": 10, "errors": 1}]) == 0.1
    assert coordination.error_rate([{"calls": 0, "errors": 0}]) is None and coordination.error_rate([]) is None


def test_replaying_with_breakers_gives_byte_identical_records():
    opened, closed = breaker("OPEN", 2), breaker("CLOSED", 6)
    windows = [window(i, 3000.0, 0.3, None if i < 2 else opened if i < 6 else closed) for i in range(10)]
    first, second = run(windows)[1], run(windows)[1]
    assert [encode(d) for d in first] == [encode(d) for d in second]
    assert {d["reason_code"] for d in first} & {"BREAKER_OPEN"}


def test_a_policy_without_the_new_key_still_loads_with_its_default():
    doc = dict(POLICY.raw["scaling"])
    doc.pop("saturation_max_error_rate", None)
    assert ScalingPolicy.from_dict(doc).saturation_max_error_rate == 0.05
    with pytest.raises(ValueError, match="scaling.saturation_max_error_rate"):
        ScalingPolicy.from_dict({**doc, "saturation_max_error_rate": 1.5})


def onset(opened_at: int, brk_after: dict, error_rate: float = 0.5, instances: int = 3, more: int = 3) -> list[dict]:
    """A storm's onset: svc saturated with its breaker CLOSED until window `opened_at` (scale-outs
    recommended, none running yet: the same three instances observed), then `brk_after` in force."""
    windows = [window(i, 3000.0, 0.0) for i in range(opened_at)]
    for i in range(opened_at, opened_at + more):
        w = window(i, 3000.0, error_rate, brk_after)
        w["instances"] = w["instances"][:instances]
        windows.append(w)
    return windows


@pytest.mark.parametrize("state", ["OPEN", "HALF_OPEN", "FORCED_OPEN"])
def test_a_pending_scale_out_is_revoked_once_the_breaker_holds_scale_outs(state):
    opened_at = WARM + 3
    opened = breaker(state, opened_at)
    _, decisions = run(onset(opened_at, opened))
    assert_valid("stormwatch_scaling_decisions", decisions)
    before = [d for d in decisions if d["window_end_ms"] < end_of(opened_at)]
    assert before[-1]["action"] == "scale_out" and before[-1]["desired_replicas"] > 3
    after = [d for d in decisions if d["window_end_ms"] >= end_of(opened_at)]
    # One decision in the window the breaker opened: back to the three instances that run, no scale-out
    # left as the recommendation, naming the breaker decision; then nothing changes while it is open.
    assert [(d["window_end_ms"], d["action"], d["reason_code"], d["current_replicas"], d["desired_replicas"])
            for d in after] == [(end_of(opened_at), "hold", "BREAKER_OPEN", 3, 3)]
    revoked = after[0]
    assert revoked["previous_desired_replicas"] == before[-1]["desired_replicas"]
    assert revoked["coordination"]["revoked"] == {
        "reason_code": "BREAKER_OPEN", "decision_id": opened["decision_id"],
        "desired_replicas": before[-1]["desired_replicas"], "scaled_out_from": 3, "current_replicas": 3}
    assert revoked["coordination"]["decisions"] == [{"decision_type": "breaker", **opened}]


def test_a_revocation_removes_no_running_replica_and_happens_once():
    opened_at = WARM + 3
    # Only two of the three instances report in the open windows: the count goes back to the three the
    # scale-outs started from, not below; and later windows revoke nothing more.
    _, decisions = run(onset(opened_at, breaker("OPEN", opened_at), instances=2))
    after = [d for d in decisions if d["window_end_ms"] >= end_of(opened_at)]
    assert [(d["current_replicas"], d["desired_replicas"], d["coordination"]["revoked"]["scaled_out_from"])
            for d in after] == [(2, 3, 3)]


def test_saturation_without_errors_revokes_nothing_and_a_dry_run_or_ramp_neither():
    opened_at = WARM + 3
    for brk, error_rate in ((breaker("OPEN", opened_at), 0.0), (breaker("OPEN", opened_at, enforced=False), 0.5),
                            (breaker("GRADUAL_RECOVERY", opened_at), 0.5)):
        _, decisions = run(onset(opened_at, brk, error_rate))
        assert not [d for d in decisions if d["coordination"]["revoked"]], brk
        assert not [d for d in decisions if d["reason_code"] == "BREAKER_OPEN"], brk


def test_after_a_revocation_the_scale_out_starts_again_from_the_running_count_once_the_breaker_closes():
    opened_at = WARM + 3
    closed_at = opened_at + 3
    windows = onset(opened_at, breaker("OPEN", opened_at)) + [
        window(i, 3000.0, 0.0, breaker("CLOSED", closed_at)) for i in range(closed_at, closed_at + 2)]
    _, decisions = run(windows)
    out = [d for d in decisions if d["window_end_ms"] >= end_of(closed_at)]
    assert out and out[0]["action"] == "scale_out" and out[0]["previous_desired_replicas"] == 3
    # The revoked scale-outs were not made: the rate limit's period starts from the three that run.
    assert out[0]["rate_limit"]["period_start_replicas"] == 3


def test_revoke_to():
    opened = breaker("OPEN", 0)
    assert coordination.revoke_to(20, 3, 5, 1, opened, False) == 5
    assert coordination.revoke_to(20, 3, 1, 1, opened, False) == 3      # never below where it started
    assert coordination.revoke_to(20, 3, 1, 4, opened, False) == 4      # nor min_replicas
    assert coordination.revoke_to(20, 3, 25, 1, opened, False) is None  # all of it runs: nothing to take back
    assert coordination.revoke_to(20, None, 5, 1, opened, False) is None
    assert coordination.revoke_to(20, 3, 5, 1, opened, True) is None    # saturated without errors
    assert coordination.revoke_to(20, 3, 5, 1, breaker("GRADUAL_RECOVERY", 0), False) is None
    assert coordination.revoke_to(20, 3, 5, 1, None, False) is None


def test_a_scale_out_through_the_open_breaker_is_not_revoked_by_a_later_window():
    # Open from the start: saturated without errors, svc scales out through it; then a window with errors
    # (or without data) holds further scale-outs but takes back nothing the breaker let through.
    opened = breaker("OPEN", 0)
    windows = [window(i, 3000.0, 0.0, opened) for i in range(WARM + 3)]
    windows += [window(i, 3000.0, 0.5, opened) for i in range(WARM + 3, WARM + 5)]
    _, decisions = run(windows)
    assert [d for d in decisions if d["action"] == "scale_out"]
    assert not [d for d in decisions if d["coordination"]["revoked"]], [
        (d["window_end_ms"], d["action"], d["reason_code"], d["desired_replicas"]) for d in decisions]
