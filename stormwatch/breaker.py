"""Circuit breakers per service and per caller -> callee edge, as a state machine in event time.

States: CLOSED (all calls admitted) -> OPEN (none) -> HALF_OPEN (at most max_probes probe calls) ->
GRADUAL_RECOVERY (an admitted share that ramps up) -> CLOSED; FORCED_OPEN and DISABLED are set by the
policy's overrides. Time is the observations' window ends, never the wall clock, so a replay of the
same windows gives the same transitions.

- A window is *tripping* with ≥ min_calls calls and a score below open_below_score or a failure rate
  above failure_rate_threshold. It is *healthy* (hysteresis: stricter) with ≥ min_calls calls, a score
  (when there is one) at or above close_above_score and a failure rate at or below healthy_failure_rate.
- CLOSED -> OPEN on a tripping window. OPEN -> HALF_OPEN once window_end − since ≥ open_wait_s.
- HALF_OPEN: the probes are the observations whose window ends within the last probe_window_seconds.
  Once they hold min(max_probes, probe_window_calls) calls, a success rate ≥ probe_success_rate moves
  to GRADUAL_RECOVERY at ramp_step_percent, below re-opens. Fewer calls: keep probing.
- GRADUAL_RECOVERY: a healthy window at least ramp_step_seconds after the last step adds
  ramp_step_percent (100 % -> CLOSED). An unhealthy window fails the step: back one step and the step
  timer restarts; further unhealthy windows in that same step period do not count again, so
  ramp_failures_to_open failed steps in a row (about (n−1)·ramp_step_seconds of trouble) re-open.
  Windows with too few calls hold the ramp where it is.
- Open wait: the first opening (after rest) waits open_wait_seconds; every further opening multiplies
  the wait by open_wait_multiplier up to max_open_wait_seconds; every healthy CLOSED window divides it
  back, and once it would fall below open_wait_seconds the breaker is rested (open_count 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stormwatch.validation import positive_number, section_of, share

CLOSED, OPEN, HALF_OPEN, GRADUAL_RECOVERY = "CLOSED", "OPEN", "HALF_OPEN", "GRADUAL_RECOVERY"
FORCED_OPEN, DISABLED, DRY_RUN = "FORCED_OPEN", "DISABLED", "DRY_RUN"
OVERRIDES = (FORCED_OPEN, DISABLED, DRY_RUN)
# States in which the breaker lets no regular call through (retries are pointless there).
BLOCKING = (OPEN, FORCED_OPEN, HALF_OPEN)

KEYS = ("open_below_score", "failure_rate_threshold", "min_calls", "close_above_score", "healthy_failure_rate",
        "open_wait_seconds", "open_wait_multiplier", "max_open_wait_seconds", "max_probes",
        "probe_window_seconds", "probe_window_calls", "probe_success_rate", "ramp_step_percent",
        "ramp_step_seconds", "ramp_failures_to_open", "dry_run", "overrides")


@dataclass(frozen=True)
class BreakerPolicy:
    open_below_score: float
    failure_rate_threshold: float
    min_calls: int
    close_above_score: float
    healthy_failure_rate: float
    open_wait_seconds: float
    open_wait_multiplier: float
    max_open_wait_seconds: float
    max_probes: int
    probe_window_seconds: float
    probe_window_calls: int
    probe_success_rate: float
    ramp_step_percent: float
    ramp_step_seconds: float
    ramp_failures_to_open: int
    dry_run: bool
    overrides: Mapping[str, str]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BreakerPolicy:
        d = section_of(d, "breaker", KEYS)
        shares = ("open_below_score", "failure_rate_threshold", "close_above_score", "healthy_failure_rate",
                  "probe_success_rate")
        integers = ("min_calls", "max_probes", "probe_window_calls", "ramp_failures_to_open")
        values = {k: share(d, k, "breaker") for k in shares}
        values |= {k: positive_number(d, k, "breaker", integer=True) for k in integers}
        values |= {k: float(positive_number(d, k, "breaker")) for k in
                   ("open_wait_seconds", "open_wait_multiplier", "max_open_wait_seconds", "probe_window_seconds",
                    "ramp_step_percent", "ramp_step_seconds")}
        if values["close_above_score"] < values["open_below_score"]:
            raise ValueError("breaker.close_above_score: must be ≥ open_below_score (hysteresis)")
        if values["healthy_failure_rate"] > values["failure_rate_threshold"]:
            raise ValueError("breaker.healthy_failure_rate: must be ≤ failure_rate_threshold (hysteresis)")
        if values["open_wait_multiplier"] < 1:
            raise ValueError("breaker.open_wait_multiplier: must be ≥ 1")
        if values["max_open_wait_seconds"] < values["open_wait_seconds"]:
            raise ValueError("breaker.max_open_wait_seconds: must be ≥ open_wait_seconds")
        if values["ramp_step_percent"] > 100:
            raise ValueError("breaker.ramp_step_percent: must be ≤ 100")
        if not isinstance(d["dry_run"], bool):
            raise ValueError(f"breaker.dry_run: expected true or false, got {d['dry_run']!r}")
        overrides = d["overrides"]
        if not isinstance(overrides, Mapping):
            raise ValueError("breaker.overrides: expected a table of entity key -> override")
        for key, mode in overrides.items():
            if mode not in OVERRIDES:
                raise ValueError(f"breaker.overrides.{key}: expected one of {', '.join(OVERRIDES)}, got {mode!r}")
        return cls(**values, dry_run=d["dry_run"], overrides=dict(overrides))


@dataclass(frozen=True)
class BreakerObservation:
    window_start_ms: int
    window_end_ms: int
    calls: int
    failures: int
    score: float | None
    entity_key: str = ""   # for the policy's overrides


@dataclass(frozen=True)
class BreakerState:
    state: str
    since_ms: int                 # when the state was entered; in GRADUAL_RECOVERY, the last step
    open_count: int               # openings since the breaker last rested
    open_wait_s: float            # the wait of the current (or last) opening
    admitted_share: float
    ramp_failures: int            # failed ramp steps in a row
    probes: tuple[tuple[int, int, int], ...]   # HALF_OPEN: (window_end_ms, calls, failures) in the probe window
    last_window_end_ms: int


@dataclass(frozen=True)
class BreakerStep:
    state: BreakerState
    previous: str
    reason_code: str
    changed: bool
    admitted_share: float
    max_probes: int | None
    thresholds: dict[str, Any]
    enforced: bool


def initial(policy: BreakerPolicy, at_ms: int) -> BreakerState:
    return BreakerState(CLOSED, at_ms, 0, policy.open_wait_seconds, 1.0, 0, (), at_ms)


def _classify(obs: BreakerObservation, policy: BreakerPolicy) -> tuple[str, bool]:
    """(reason code of the window against the open thresholds, healthy by the stricter close thresholds)."""
    if obs.calls < policy.min_calls:
        return "INSUFFICIENT_DATA", False
    failure_rate = obs.failures / obs.calls
    healthy = failure_rate <= policy.healthy_failure_rate and (obs.score is None
                                                               or obs.score >= policy.close_above_score)
    if obs.score is not None and obs.score < policy.open_below_score:
        return "SCORE_BELOW_OPEN_THRESHOLD", healthy
    if failure_rate > policy.failure_rate_threshold:
        return "FAILURE_RATE_ABOVE_THRESHOLD", healthy
    return "HEALTHY", healthy


def _open(state: BreakerState, at_ms: int, policy: BreakerPolicy) -> BreakerState:
    wait = (policy.open_wait_seconds if state.open_count == 0
            else min(state.open_wait_s * policy.open_wait_multiplier, policy.max_open_wait_seconds))
    return replace(state, state=OPEN, since_ms=at_ms, open_count=state.open_count + 1, open_wait_s=wait,
                   admitted_share=0.0, ramp_failures=0, probes=())


def _ramp_share(current: float, percent_delta: float) -> float:
    # Whole steps of ramp_step_percent, rounded so 20 steps of 5 % are exactly 100 %.
    return round(min(max(current + percent_delta / 100, 0.0), 1.0), 9)


def step(state: BreakerState | None, obs: BreakerObservation, policy: BreakerPolicy) -> BreakerStep:
    """The breaker after one more window of the entity."""
    now = obs.window_end_ms
    state = state or initial(policy, obs.window_start_ms)
    override = policy.overrides.get(obs.entity_key)
    enforced = not policy.dry_run and override != DRY_RUN
    thresholds: dict[str, Any] = {
        "open_below_score": policy.open_below_score, "failure_rate_threshold": policy.failure_rate_threshold,
        "close_above_score": policy.close_above_score, "healthy_failure_rate": policy.healthy_failure_rate,
        "min_calls": policy.min_calls, "calls": obs.calls, "failures": obs.failures, "score": obs.score,
    }
    reason, healthy = _classify(obs, policy)
    if now <= state.last_window_end_ms:
        # A window already seen (a replayed record): nothing moves.
        return _result(state, state, reason, policy, thresholds, enforced)
    new_state, reason = _next(state, obs, policy, override, reason, healthy, thresholds)
    return _result(state, replace(new_state, last_window_end_ms=now), reason, policy, thresholds, enforced)


def _next(state: BreakerState, obs: BreakerObservation, policy: BreakerPolicy, override: str | None,
          reason: str, healthy: bool, thresholds: dict[str, Any]) -> tuple[BreakerState, str]:
    now = obs.window_end_ms
    if override == FORCED_OPEN:
        if state.state == FORCED_OPEN:
            return state, "FORCED_OPEN_BY_POLICY"
        return replace(state, state=FORCED_OPEN, since_ms=now, admitted_share=0.0, probes=()), "FORCED_OPEN_BY_POLICY"
    if override == DISABLED:
        if state.state == DISABLED:
            return state, "DISABLED_BY_POLICY"
        return replace(state, state=DISABLED, since_ms=now, admitted_share=1.0, probes=()), "DISABLED_BY_POLICY"
    # An override lifted: a forced opening counts as open time, a disabled breaker starts closed.
    current = {FORCED_OPEN: OPEN, DISABLED: CLOSED}.get(state.state, state.state)

    if current == CLOSED:
        if reason in ("SCORE_BELOW_OPEN_THRESHOLD", "FAILURE_RATE_ABOVE_THRESHOLD"):
            return _open(state, now, policy), reason
        if healthy and state.open_count:
            wait = state.open_wait_s / policy.open_wait_multiplier
            rested = wait < policy.open_wait_seconds
            state = replace(state, open_wait_s=policy.open_wait_seconds if rested else wait,
                            open_count=0 if rested else state.open_count)
        return replace(state, state=CLOSED, admitted_share=1.0), reason

    if current == OPEN:
        waited_s = (now - state.since_ms) / 1000
        thresholds |= {"open_wait_s": state.open_wait_s, "waited_s": waited_s}
        if waited_s >= state.open_wait_s:
            return replace(state, state=HALF_OPEN, since_ms=now, admitted_share=0.0, probes=()), "OPEN_WAIT_ELAPSED"
        return replace(state, state=OPEN, admitted_share=0.0), reason

    if current == HALF_OPEN:
        horizon = now - policy.probe_window_seconds * 1000
        probes = tuple(p for p in (*state.probes, (now, obs.calls, obs.failures)) if p[0] > horizon)
        calls = sum(p[1] for p in probes)
        failures = sum(p[2] for p in probes)
        needed = min(policy.max_probes, policy.probe_window_calls)
        success = (calls - failures) / calls if calls else None
        thresholds |= {"probe_calls": calls, "probe_failures": failures, "probes_needed": needed,
                       "probe_success": success, "probe_success_rate": policy.probe_success_rate}
        if calls < needed:
            return replace(state, probes=probes), "INSUFFICIENT_DATA"
        if success >= policy.probe_success_rate:
            return replace(state, state=GRADUAL_RECOVERY, since_ms=now, probes=(), ramp_failures=0,
                           admitted_share=_ramp_share(0.0, policy.ramp_step_percent)), "PROBES_SUCCEEDED"
        return _open(state, now, policy), "PROBES_FAILED"

    # GRADUAL_RECOVERY
    since_step_s = (now - state.since_ms) / 1000
    thresholds |= {"ramp_step_percent": policy.ramp_step_percent, "ramp_step_seconds": policy.ramp_step_seconds,
                   "since_step_s": since_step_s, "ramp_failures": state.ramp_failures,
                   "ramp_failures_to_open": policy.ramp_failures_to_open}
    if reason == "INSUFFICIENT_DATA":
        return state, reason
    if not healthy:
        if state.ramp_failures and since_step_s < policy.ramp_step_seconds:
            return state, reason   # this step has already failed
        failures = state.ramp_failures + 1
        if failures >= policy.ramp_failures_to_open:
            return _open(state, now, policy), "RAMP_FAILED_REOPEN"
        back = max(_ramp_share(state.admitted_share, -policy.ramp_step_percent),
                   _ramp_share(0.0, policy.ramp_step_percent))
        return replace(state, since_ms=now, ramp_failures=failures, admitted_share=back), "RAMP_STEP_BACK"
    if since_step_s < policy.ramp_step_seconds:
        return state, reason
    up = _ramp_share(state.admitted_share, policy.ramp_step_percent)
    if up >= 1.0:
        return replace(state, state=CLOSED, since_ms=now, ramp_failures=0, admitted_share=1.0), "RAMP_COMPLETE"
    return replace(state, since_ms=now, ramp_failures=0, admitted_share=up), "RAMP_STEP_UP"


def _result(before: BreakerState, after: BreakerState, reason: str, policy: BreakerPolicy,
            thresholds: dict[str, Any], enforced: bool) -> BreakerStep:
    changed = after.state != before.state or after.admitted_share != before.admitted_share
    return BreakerStep(after, before.state, reason, changed, after.admitted_share,
                       policy.max_probes if after.state == HALF_OPEN else None, thresholds, enforced)
