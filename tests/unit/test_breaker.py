import tomllib

import pytest

from stormwatch.breaker import BreakerObservation, BreakerPolicy, step
from stormwatch.config import PROJECT_ROOT

DOC = tomllib.loads((PROJECT_ROOT / "config" / "policy.toml").read_text())["breaker"]
SLIDE_MS = 10_000


def policy(**kw) -> BreakerPolicy:
    return BreakerPolicy.from_dict({**DOC, "open_wait_seconds": 30, "open_wait_multiplier": 2.0,
                                    "max_open_wait_seconds": 120, "ramp_step_percent": 5,
                                    "ramp_step_seconds": 30, "ramp_failures_to_open": 3, "min_calls": 20,
                                    "open_below_score": 0.3, "close_above_score": 0.4,
                                    "failure_rate_threshold": 0.5, "healthy_failure_rate": 0.3,
                                    "max_probes": 20, "probe_window_calls": 50, "probe_success_rate": 0.92,
                                    "probe_window_seconds": 10, **kw})


class Run:
    """Feeds one window per slide to the breaker of one entity and keeps every step."""

    def __init__(self, pol: BreakerPolicy, key: str = "service:a"):
        self.policy, self.key, self.state, self.end, self.steps = pol, key, None, 30_000, []

    def window(self, calls=100, failures=0, score=0.9):
        obs = BreakerObservation(self.end - 30_000, self.end, calls, failures, score, self.key)
        result = step(self.state, obs, self.policy)
        self.state, self.end = result.state, self.end + SLIDE_MS
        self.steps.append(result)
        return result

    def until(self, name, limit=500, **window):
        for _ in range(limit):
            if self.window(**window).state.state == name:
                return self.steps[-1]
        raise AssertionError(f"never reached {name}: {[s.reason_code for s in self.steps[-5:]]}")


def test_healthy_windows_stay_closed_and_publish_nothing():
    run = Run(policy())
    first = run.window()
    assert first.state.state == "CLOSED" and first.reason_code == "HEALTHY" and not first.changed
    assert all(not run.window().changed for _ in range(10))


def test_low_score_opens():
    s = Run(policy()).window(score=0.2)
    assert (s.previous, s.state.state, s.reason_code, s.changed) == ("CLOSED", "OPEN", "SCORE_BELOW_OPEN_THRESHOLD", True)
    assert s.admitted_share == 0.0 and s.thresholds["open_below_score"] == 0.3


def test_failure_rate_opens():
    s = Run(policy()).window(failures=51, score=None)
    assert (s.state.state, s.reason_code) == ("OPEN", "FAILURE_RATE_ABOVE_THRESHOLD")


def test_too_few_calls_never_open():
    s = Run(policy()).window(calls=19, failures=19, score=None)
    assert (s.state.state, s.reason_code, s.changed) == ("CLOSED", "INSUFFICIENT_DATA", False)


def test_open_waits_in_event_time_then_half_open():
    run = Run(policy())
    run.window(failures=100)
    assert run.window().state.state == "OPEN"      # 10 s
    assert run.window().state.state == "OPEN"      # 20 s
    s = run.window()                               # 30 s
    assert (s.state.state, s.reason_code, s.max_probes) == ("HALF_OPEN", "OPEN_WAIT_ELAPSED", 20)
    assert s.admitted_share == 0.0


def half_open(run: Run) -> None:
    run.window(failures=100)
    run.until("HALF_OPEN")


def test_probes_succeed_into_gradual_recovery():
    run = Run(policy())
    half_open(run)
    assert run.window(calls=10, failures=0).reason_code == "INSUFFICIENT_DATA"   # 10 < min(20, 50)
    s = run.window(calls=20, failures=1)
    assert (s.previous, s.state.state, s.reason_code) == ("HALF_OPEN", "GRADUAL_RECOVERY", "PROBES_SUCCEEDED")
    assert s.admitted_share == pytest.approx(0.05)


def test_probes_fail_back_to_open_with_a_longer_wait():
    run = Run(policy())
    half_open(run)
    s = run.window(calls=20, failures=5)
    assert (s.state.state, s.reason_code, s.state.open_wait_s) == ("OPEN", "PROBES_FAILED", 60)


def test_ramp_from_5_percent_to_closed_in_19_steps_of_30_seconds():
    run = Run(policy())
    half_open(run)
    run.window(calls=20)
    shares, ends = [], []
    while run.state.state != "CLOSED":
        s = run.window()
        if s.changed:
            shares.append(s.admitted_share)
            ends.append(s.state.since_ms)
    assert len(shares) == 19
    assert shares[:3] == pytest.approx([0.10, 0.15, 0.20]) and shares[-1] == 1.0
    assert {b - a for a, b in zip(ends, ends[1:])} == {30_000}
    assert run.steps[-1].reason_code == "RAMP_COMPLETE"
    assert [s.reason_code for s in run.steps if s.changed][-2] == "RAMP_STEP_UP"


def ramping(run: Run, steps_up: int) -> None:
    half_open(run)
    run.window(calls=20)
    for _ in range(steps_up * 3):
        run.window()


def test_unhealthy_window_steps_back_once_per_step_and_three_in_a_row_reopen():
    run = Run(policy())
    ramping(run, 4)
    assert run.state.admitted_share == pytest.approx(0.25)
    s = run.window(failures=40)     # between the thresholds: not healthy while recovering
    assert (s.reason_code, s.admitted_share, s.state.ramp_failures) == ("RAMP_STEP_BACK", pytest.approx(0.20), 1)
    assert not run.window(failures=40).changed and not run.window(failures=40).changed   # same step
    s = run.window(failures=40)
    assert (s.reason_code, s.state.ramp_failures) == ("RAMP_STEP_BACK", 2)
    run.window(failures=40), run.window(failures=40)
    s = run.window(failures=40)
    assert (s.state.state, s.reason_code, s.state.open_wait_s) == ("OPEN", "RAMP_FAILED_REOPEN", 60)


def test_a_healthy_step_resets_the_ramp_failures():
    run = Run(policy())
    ramping(run, 4)
    run.window(failures=40)
    run.window(), run.window()
    s = run.window()
    assert (s.reason_code, s.state.ramp_failures) == ("RAMP_STEP_UP", 0)


def test_hysteresis_failure_rate_oscillating_around_the_open_threshold_never_closes():
    run = Run(policy())
    half_open(run)
    for i in range(300):
        run.window(failures=45 if i % 2 else 55, score=None)
    names = {s.state.state for s in run.steps[1:]}
    assert "CLOSED" not in names and "GRADUAL_RECOVERY" not in names
    assert run.state.open_wait_s == 120            # the wait grew to the cap instead of flapping


def test_hysteresis_a_score_dipping_below_the_open_threshold_opens_once_and_does_not_flap():
    # One window in a hundred below open_below_score (0.25 < 0.3), the others between the thresholds
    # (0.3 <= 0.35 < close_above_score 0.4): no failures, so the probes pass every time.
    def transitions(pol):
        run = Run(pol)
        for i in range(600):
            run.window(score=0.25 if i % 100 == 0 else 0.35)
        return [(s.previous, s.state.state) for s in run.steps if s.previous != s.state.state]

    moves = transitions(policy())
    # Opened by the first dip; every recovery then fails on the 0.35 windows (not healthy) and
    # re-opens, so the breaker never closes again.
    assert moves.count(("CLOSED", "OPEN")) == 1 and ("GRADUAL_RECOVERY", "CLOSED") not in moves
    assert moves.count(("GRADUAL_RECOVERY", "OPEN")) >= 5
    # Without hysteresis the same windows close the breaker and open it again on every dip.
    flapping = transitions(policy(close_above_score=0.3))
    assert flapping.count(("GRADUAL_RECOVERY", "CLOSED")) == flapping.count(("CLOSED", "OPEN")) == 6


def test_open_wait_grows_on_reopening_and_decays_in_healthy_closed_windows():
    run = Run(policy())
    half_open(run)
    assert run.state.open_count == 1 and run.state.open_wait_s == 30
    run.window(calls=20, failures=20)            # probes fail: 60
    run.until("HALF_OPEN")
    run.window(calls=20, failures=20)            # 120
    run.until("HALF_OPEN")
    run.window(calls=20, failures=20)            # capped at 120
    assert run.state.open_wait_s == 120 and run.state.open_count == 4
    run.until("HALF_OPEN")
    run.window(calls=20)
    run.until("CLOSED")
    assert run.state.open_wait_s == 120
    run.window()
    assert run.state.open_wait_s == 60
    run.window()
    assert run.state.open_wait_s == 30 and run.state.open_count == 4
    run.window()
    assert run.state.open_wait_s == 30 and run.state.open_count == 0    # rested
    s = run.window(failures=100)
    assert s.state.open_wait_s == 30


def test_reopening_soon_after_closing_waits_longer():
    run = Run(policy())
    half_open(run)
    run.window(calls=20, failures=20)
    run.until("HALF_OPEN")
    run.window(calls=20)
    run.until("CLOSED")
    assert run.state.open_wait_s == 60
    assert run.window(failures=100).state.open_wait_s == 120


def test_forced_open_override_and_lifting_it():
    run = Run(policy(overrides={"service:a": "FORCED_OPEN"}))
    s = run.window()
    assert (s.state.state, s.reason_code, s.admitted_share, s.changed) == ("FORCED_OPEN", "FORCED_OPEN_BY_POLICY", 0.0, True)
    assert not run.window().changed
    run.policy = policy()
    s = run.window()     # 20 s after it was forced open: the forced time counts as open time
    assert (s.previous, s.state.state, s.changed) == ("FORCED_OPEN", "OPEN", True)
    s = run.window()
    assert (s.previous, s.state.state, s.reason_code) == ("OPEN", "HALF_OPEN", "OPEN_WAIT_ELAPSED")


def test_disabled_override_admits_everything_and_lifting_it_resumes_closed():
    run = Run(policy(overrides={"service:a": "DISABLED"}))
    s = run.window(failures=100)
    assert (s.state.state, s.reason_code, s.admitted_share) == ("DISABLED", "DISABLED_BY_POLICY", 1.0)
    assert run.window(failures=100).state.state == "DISABLED"
    run.policy = policy()
    s = run.window(failures=100)
    assert (s.previous, s.state.state) == ("DISABLED", "OPEN")


def test_other_entities_are_not_overridden():
    s = Run(policy(overrides={"service:b": "FORCED_OPEN"})).window()
    assert s.state.state == "CLOSED"


@pytest.mark.parametrize("pol, key", [
    (policy(dry_run=True), "service:a"),
    (policy(overrides={"edge:a->b": "DRY_RUN"}), "edge:a->b"),
])
def test_dry_run_decides_but_does_not_enforce(pol, key):
    s = Run(pol, key).window(failures=100)
    assert s.state.state == "OPEN" and s.enforced is False
    assert Run(policy()).window(failures=100).enforced is True


def test_a_window_seen_twice_changes_nothing():
    pol = policy()
    obs = BreakerObservation(0, 30_000, 100, 100, 0.1, "service:a")
    first = step(None, obs, pol)
    again = step(first.state, obs, pol)
    assert again.state == first.state and not again.changed


@pytest.mark.parametrize("change, key", [
    ({"close_above_score": 0.2}, "breaker.close_above_score"),
    ({"healthy_failure_rate": 0.6}, "breaker.healthy_failure_rate"),
    ({"open_wait_multiplier": 0.5}, "breaker.open_wait_multiplier"),
    ({"max_open_wait_seconds": 10}, "breaker.max_open_wait_seconds"),
    ({"ramp_step_percent": 150}, "breaker.ramp_step_percent"),
    ({"probe_success_rate": 1.5}, "breaker.probe_success_rate"),
    ({"max_probes": 0}, "breaker.max_probes"),
    ({"dry_run": "yes"}, "breaker.dry_run"),
    ({"overrides": {"service:a": "OFF"}}, "breaker.overrides.service:a"),
])
def test_invalid_policy_names_the_key(change, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        BreakerPolicy.from_dict({**DOC, **change})
