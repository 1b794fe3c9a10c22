"""Scaling recommendations per service from its QPS–latency Pareto front, computed as Kubernetes'
HorizontalPodAutoscaler does (pkg/controller/podautoscaler, autoscaling/v2 behavior), in event time:
"now" is the front's window end, so replaying the same windows gives the same recommendations.

The signal of a window, with SLO = slo_for(service) and slack threshold = slack_ratio × SLO:
- SATURATED_SCALE_OUT: the front's max-QPS point (its busiest instance) is above the SLO. HPA's
  formula with metric = that latency, target = SLO: desired = ceil(replicas × metric / target).
- SLACK_SCALE_IN: otherwise, the front's min-latency point is below the slack threshold. The same
  formula aimed at the slack threshold, desired = ceil(replicas × latency / slack threshold), but never
  below ceil(replicas × max-QPS latency / SLO): by the same proportional model the busiest instance
  must stay within the SLO. If that leaves no replica to remove: UNEVEN_LOAD (the slack is only on
  lightly loaded instances; a scale-in would push the busy ones over the SLO), hold.
- WITHIN_TOLERANCE: either case with |metric / target − 1| ≤ tolerance, hold (HPA's dead band).
- WITHIN_SLO: neither case, hold. INSUFFICIENT_DATA: the front is empty (no instance, or every one
  excluded), hold; that hold is recorded as a recommendation like any other, so missing data delays a
  scale-in rather than letting it through.
Saturation is checked first: a front both saturated and slack (uneven load) scales out.

Then, as HPA's normalizeDesiredReplicasWithBehaviors, in this order:
- Stabilization. Every window's recommendation is kept with its window end; the first step also
  records the starting replicas (HPA's initial recommendation), so nothing scales in during the first
  scale_down_stabilization_seconds. A scale-out goes to the lowest recommendation of the last
  scale_up_stabilization_seconds, a scale-in to the highest of the last scale_down_stabilization_seconds,
  never past the current count; held entirely, STABILIZING. So no direction reverses inside the new
  direction's window: after a scale-out its recommendation (≥ the new count) stays in the scale-down
  window until scale_down_stabilization_seconds have passed, and symmetrically for a scale-in.
- Rate limits. Over the direction's period_seconds the count may move by the larger of pods and
  percent of the count at the period's start (the current count minus the changes made within the
  period), as behavior.policies with selectPolicy Max; RATE_LIMITED when that bounds the change.
- Bounds: min_replicas and max_replicas, AT_MIN_REPLICAS / AT_MAX_REPLICAS when they bound it. A count
  already outside them goes straight to the bound, with no stabilization or rate limit (as HPA).

Replicas: the formula, the hold value and the rate limits use the count this module last recommended
(state.replicas), starting from current_replicas on the first step. The instances observed in later
windows (current_replicas) lag a recommendation by the start and warm-up of new instances, and holding
at the observed count would undo a scale-out still under way; they are reported, not used.

Coordination (stormwatch/coordination.py), last: a scale-out while the service's breaker lets no call
through is held, BREAKER_OPEN, unless the window is saturated with an error rate at most
saturation_max_error_rate; a scale-in while the breaker is not CLOSED is held, BREAKER_RECOVERING. A held
change is no change: the count, the rate limits' events and the scale-out's effect on stabilization
stay as they were (the window's recommendation is still kept, as any other). And while the breaker
holds scale-outs, the scale-outs recommended before it opened that are not running yet are revoked (a
scale-out made through the open breaker, saturated without errors, is not, nor those before it):
the count goes back to the instances observed in the window (current_replicas), never below the count
those scale-outs started from (state.scaled_out_from) nor min_replicas, action hold, reason
BREAKER_OPEN, coordination.revoked naming the breaker decision; the rate limits forget the revoked
scale-outs. So no window whose breaker holds scale-outs leaves a scale-out as the recommendation.

A window ending at or before the last one seen (a late duplicate) changes nothing and publishes
nothing. A body is returned only when desired replicas, action or reason code differ from the last
body returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.coordination import BREAKER_OPEN, coordinate, holds_scale_out, revoke_to
from stormwatch.validation import positive_number, section_of, share
from stormwatch.pareto import Front, InstancePoint

SATURATED_SCALE_OUT, SLACK_SCALE_IN = "SATURATED_SCALE_OUT", "SLACK_SCALE_IN"
WITHIN_TOLERANCE, WITHIN_SLO, UNEVEN_LOAD = "WITHIN_TOLERANCE", "WITHIN_SLO", "UNEVEN_LOAD"
INSUFFICIENT_DATA, STABILIZING, RATE_LIMITED = "INSUFFICIENT_DATA", "STABILIZING", "RATE_LIMITED"
AT_MAX_REPLICAS, AT_MIN_REPLICAS = "AT_MAX_REPLICAS", "AT_MIN_REPLICAS"
SCALE_OUT, SCALE_IN, HOLD = "scale_out", "scale_in", "hold"

KEYS = ("slo_ms", "slack_ratio", "tolerance", "scale_up_stabilization_seconds", "scale_down_stabilization_seconds",
        "scale_up_limit", "scale_down_limit", "min_replicas", "max_replicas", "saturation_max_error_rate")
# Keys added after policy files were written, with the value a file without them gets (so it still loads).
DEFAULTS = {"saturation_max_error_rate": 0.05}
# Digits kept before rounding replica counts up or down, so float noise (10 × 1.1 = 11.000000000000002)
# does not add or remove a replica.
DIGITS = 9


@dataclass(frozen=True)
class RateLimit:
    percent: float
    pods: int
    period_seconds: float

    @classmethod
    def from_dict(cls, d: Any, section: str) -> RateLimit:
        d = section_of(d, section, ("percent", "pods", "period_seconds"))
        return cls(float(positive_number(d, "percent", section)), int(positive_number(d, "pods", section, integer=True)),
                   float(positive_number(d, "period_seconds", section)))


@dataclass(frozen=True)
class ScalingPolicy:
    slo_ms: Mapping[str, float]     # service -> SLO; "default" for the others
    slack_ratio: float
    tolerance: float
    scale_up_stabilization_seconds: float
    scale_down_stabilization_seconds: float
    scale_up_limit: RateLimit
    scale_down_limit: RateLimit
    min_replicas: int
    max_replicas: int
    # Coordination: a scale-out goes ahead while the breaker is open only when the window is saturated
    # with at most this error rate (stormwatch/coordination.py).
    saturation_max_error_rate: float = DEFAULTS["saturation_max_error_rate"]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScalingPolicy:
        d = section_of({**DEFAULTS, **d} if isinstance(d, Mapping) else d, "scaling", KEYS)
        slo = d["slo_ms"]
        if not isinstance(slo, Mapping) or "default" not in slo:
            raise ValueError("scaling.slo_ms: expected a table of service -> SLO (ms) with a `default`")
        slo = {service: float(positive_number(slo, service, "scaling.slo_ms")) for service in slo}
        slack = share(d, "slack_ratio", "scaling")
        if not 0 < slack < 1:
            raise ValueError(f"scaling.slack_ratio: must be on (0, 1), got {slack!r}")
        minimum = int(positive_number(d, "min_replicas", "scaling", integer=True))
        maximum = int(positive_number(d, "max_replicas", "scaling", integer=True))
        if maximum < minimum:
            raise ValueError(f"scaling.max_replicas: {maximum} is below min_replicas {minimum}")
        return cls(slo, slack, share(d, "tolerance", "scaling"),
                   float(positive_number(d, "scale_up_stabilization_seconds", "scaling", allow_zero=True)),
                   float(positive_number(d, "scale_down_stabilization_seconds", "scaling", allow_zero=True)),
                   RateLimit.from_dict(d["scale_up_limit"], "scaling.scale_up_limit"),
                   RateLimit.from_dict(d["scale_down_limit"], "scaling.scale_down_limit"), minimum, maximum,
                   share(d, "saturation_max_error_rate", "scaling"))

    def slo_for(self, service: str) -> float:
        return self.slo_ms.get(service, self.slo_ms["default"])


@dataclass(frozen=True)
class ScalingState:
    replicas: int                                   # the last recommendation
    recommendations: tuple[tuple[int, int], ...]    # (window_end_ms, recommendation), the longest window's
    scale_events: tuple[tuple[int, int], ...]       # (window_end_ms, replica change), the longest period's
    last_emitted: tuple[int, str, str]              # (desired_replicas, action, reason_code) of the last body
    last_window_end_ms: int
    # The count the scale-outs since the last scale-in or revocation started from (None: none since, or
    # the last went through a breaker that lets no call through, saturated without errors): a breaker
    # that holds scale-outs revokes what of them is not running yet, never below it.
    scaled_out_from: int | None = None


def _ceil(x: float) -> int:
    return math.ceil(round(x, DIGITS))


def _floor(x: float) -> int:
    return math.floor(round(x, DIGITS))


def _point(p: InstancePoint | None) -> dict[str, Any] | None:
    return None if p is None else {"instance": p.instance, "qps": p.qps, "latency_ms": p.latency_ms}


def _signal(front: Front, replicas: int, policy: ScalingPolicy) -> tuple[int, str, dict[str, Any] | None]:
    """(recommendation, reason, the point it rests on) from the window's front alone."""
    top, low = front.max_qps, front.min_latency
    if top is None:
        return replicas, INSUFFICIENT_DATA, None
    slo = policy.slo_for(front.service)
    slack = policy.slack_ratio * slo
    ratio = round(top.latency_ms / slo, DIGITS)
    if ratio > 1:
        metric = {"point": "max_qps", **_point(top)}
        if round(ratio - 1, DIGITS) <= policy.tolerance:
            return replicas, WITHIN_TOLERANCE, metric
        return _ceil(replicas * top.latency_ms / slo), SATURATED_SCALE_OUT, metric
    ratio = round(low.latency_ms / slack, DIGITS)
    if ratio >= 1:
        return replicas, WITHIN_SLO, {"point": "max_qps", **_point(top)}
    metric = {"point": "min_latency", **_point(low)}
    if round(1 - ratio, DIGITS) <= policy.tolerance:
        return replicas, WITHIN_TOLERANCE, metric
    desired = max(_ceil(replicas * low.latency_ms / slack), _ceil(replicas * top.latency_ms / slo))
    if desired >= replicas:
        return replicas, UNEVEN_LOAD, metric
    return desired, SLACK_SCALE_IN, metric


def _stabilize(history: tuple[tuple[int, int], ...], now: int, recommendation: int, replicas: int,
               policy: ScalingPolicy) -> tuple[int, dict[str, Any] | None]:
    if recommendation == replicas:
        return replicas, None
    up = recommendation > replicas
    seconds = policy.scale_up_stabilization_seconds if up else policy.scale_down_stabilization_seconds
    considered = [(t, r) for t, r in history if t > now - seconds * 1000] + [(now, recommendation)]
    values = [r for _, r in considered]
    value = max(replicas, min(values)) if up else min(replicas, max(values))
    return value, {"window_seconds": seconds, "recommendations": [list(c) for c in considered], "stabilized": value}


def _rate_limit(events: tuple[tuple[int, int], ...], now: int, replicas: int, up: bool,
                policy: ScalingPolicy) -> dict[str, Any]:
    limit = policy.scale_up_limit if up else policy.scale_down_limit
    start = replicas - sum(change for t, change in events if t > now - limit.period_seconds * 1000)
    if up:
        bound = max(start + limit.pods, _ceil(start * (1 + limit.percent / 100)), replicas)
    else:
        bound = min(start - limit.pods, _floor(start * (1 - limit.percent / 100)), replicas)
    return {"percent": limit.percent, "pods": limit.pods, "period_seconds": limit.period_seconds,
            "period_start_replicas": start, "limit": bound}


def step(state: ScalingState | None, front: Front, current_replicas: int, policy: ScalingPolicy,
         breaker: Mapping[str, Any] | None = None,
         error_rate: float | None = None) -> tuple[ScalingState, dict[str, Any] | None]:
    """The service's recommendation after this window: (new state, body when it changed, else None).
    `breaker`: the service's breaker decision as of the window's end (stormwatch/coordination.py), None
    when it has none (CLOSED); `error_rate`: the service's in the window, None without calls."""
    now = front.window_end_ms
    if state is not None and now <= state.last_window_end_ms:
        return state, None
    replicas = current_replicas if state is None else state.replicas
    history = ((now, replicas),) if state is None else state.recommendations
    events = () if state is None else state.scale_events

    recommendation, signal, metric = _signal(front, replicas, policy)
    desired, stabilization = _stabilize(history, now, recommendation, replicas, policy)
    reason, rate_limit = signal, None
    if replicas > policy.max_replicas:
        desired, reason, stabilization = policy.max_replicas, AT_MAX_REPLICAS, None
    elif replicas < policy.min_replicas:
        desired, reason, stabilization = policy.min_replicas, AT_MIN_REPLICAS, None
    elif desired == replicas != recommendation:
        reason = STABILIZING
    elif desired > replicas:
        rate_limit = _rate_limit(events, now, replicas, True, policy)
        allowed = min(rate_limit["limit"], policy.max_replicas)
        if desired > allowed:
            desired, reason = allowed, RATE_LIMITED if rate_limit["limit"] < policy.max_replicas else AT_MAX_REPLICAS
    elif desired < replicas:
        rate_limit = _rate_limit(events, now, replicas, False, policy)
        allowed = max(rate_limit["limit"], policy.min_replicas)
        if desired < allowed:
            desired, reason = allowed, RATE_LIMITED if rate_limit["limit"] > policy.min_replicas else AT_MIN_REPLICAS

    hold, coordination = coordinate(desired - replicas, signal == SATURATED_SCALE_OUT, breaker, error_rate,
                                    policy.saturation_max_error_rate)
    coordination["held"], coordination["revoked"] = None, None
    if hold is not None:
        coordination["held"] = {"reason_code": hold, "decision_id": breaker["decision_id"],
                                "action": SCALE_OUT if desired > replicas else SCALE_IN, "desired_replicas": desired}
        desired, reason = replicas, hold
    scaled_out_from = None if state is None else state.scaled_out_from
    action = SCALE_OUT if desired > replicas else SCALE_IN if desired < replicas else HOLD
    if action == SCALE_OUT and holds_scale_out(breaker, False):
        # Through a breaker that lets no call through (saturated without errors): nothing to revoke.
        scaled_out_from = None
    elif action == SCALE_OUT:
        scaled_out_from = replicas if scaled_out_from is None else scaled_out_from
    elif action == SCALE_IN:
        scaled_out_from = None
    keep_ms = 1000 * max(policy.scale_up_stabilization_seconds, policy.scale_down_stabilization_seconds)
    period_ms = 1000 * max(policy.scale_up_limit.period_seconds, policy.scale_down_limit.period_seconds)
    if desired != replicas:
        events += ((now, desired - replicas),)
    revoked = revoke_to(replicas, scaled_out_from, current_replicas, policy.min_replicas, breaker,
                        coordination["saturation"]["without_errors"])
    if revoked is not None:
        # The scale-outs not running yet are taken back: the count is what runs, held there. No running
        # replica is removed (so it is no scale-in), and the rate limits forget the revoked scale-outs.
        coordination["revoked"] = {"reason_code": BREAKER_OPEN, "decision_id": breaker["decision_id"],
                                   "desired_replicas": replicas, "scaled_out_from": scaled_out_from,
                                   "current_replicas": current_replicas}
        desired, action, reason, scaled_out_from = revoked, HOLD, BREAKER_OPEN, None
        events = tuple((t, c) for t, c in events if c < 0)
    emitted = (desired, action, reason)
    new_state = ScalingState(
        desired, tuple((t, r) for t, r in history + ((now, recommendation),) if t > now - keep_ms),
        tuple((t, c) for t, c in events if t > now - period_ms), emitted, now, scaled_out_from)
    if state is not None and state.last_emitted == emitted:
        return new_state, None
    slo = policy.slo_for(front.service)
    return new_state, {
        "service": front.service,
        "action": action,
        "current_replicas": current_replicas,
        "previous_desired_replicas": replicas,
        "desired_replicas": desired,
        "reason_code": reason,
        "recommendation": {"replicas": recommendation, "reason_code": signal},
        "metric": metric,
        "target": {"slo_ms": slo, "slack_ms": policy.slack_ratio * slo},
        "tolerance": policy.tolerance,
        "stabilization": stabilization,
        "rate_limit": rate_limit,
        "front": {"max_qps": _point(front.max_qps), "min_latency": _point(front.min_latency)},
        "coordination": coordination,
    }
