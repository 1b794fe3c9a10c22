"""Scaling coordinated with the service's circuit breaker (issue 21, item 3). Pure: no Flink.

A naive autoscaler adds replicas to a service that is failing, not saturated: in a retry storm its
latency rises with its errors, and more replicas only feed the storm. So the scaling decision of a
service window takes into account the service's breaker (stormwatch/breaker.py, the health job's
decisions on stormwatch_breaker_decisions) as of the window's end: the newest decision of the
`service:NAME` breaker whose window ends at or before the scaling window's end (the health job
decides both on the same windows). A service with no breaker decision yet is CLOSED, as every breaker
starts.

- A scale-out is held, reason BREAKER_OPEN, while the breaker is OPEN, HALF_OPEN or FORCED_OPEN (it
  lets no regular call through: its latency is not load), unless the service is saturated without
  errors: the front's busiest instance is above the SLO (the signal SATURATED_SCALE_OUT) and the
  service's error rate in the window (errors / calls over its instance rows) is at most the policy's
  scaling.saturation_max_error_rate. A window without calls has no error rate and is not exempt.
- A scale-in is held, reason BREAKER_RECOVERING, while the breaker is not CLOSED (OPEN, HALF_OPEN,
  GRADUAL_RECOVERY, FORCED_OPEN): a breaker's recovery ramp and a scale-in never happen in the same
  windows. DISABLED (the policy switched the breaker off: it admits every call and never ramps) counts
  as CLOSED.
- A decision that is not enforced (breaker.dry_run, a DRY_RUN override) is taken into account and
  listed, but holds nothing: it is published not to be acted on.

Holds apply to every change of the replica count, those that restore the policy's replica bounds
included.
- A scale-out recommended before the breaker opened (the storm's onset: latency rises before the
  errors trip the breaker) but not running yet is revoked in a window whose breaker holds scale-outs
  (as above: OPEN, HALF_OPEN, FORCED_OPEN, enforced, the window not saturated without errors): the
  recommendation goes back to the instances observed, never below the count those scale-outs started
  from nor min_replicas, reason BREAKER_OPEN (revoke_to). No running replica is removed. A scale-out
  that went through the open breaker (saturated without errors) is not revoked, nor those before it.

Every scaling decision carries a `coordination` block: the decisions taken into account (so far the
breaker's; each with its decision_id), what was held or revoked and by which decision, and the
saturation test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stormwatch.breaker import CLOSED, DISABLED, FORCED_OPEN, HALF_OPEN, OPEN

BREAKER_OPEN, BREAKER_RECOVERING = "BREAKER_OPEN", "BREAKER_RECOVERING"
# Breaker states that hold a scale-out (no regular call goes through) and those that let a scale-in go.
HOLDS_SCALE_OUT = (OPEN, HALF_OPEN, FORCED_OPEN)
ALLOWS_SCALE_IN = (CLOSED, DISABLED)
BREAKER_FIELDS = ("decision_id", "state", "window_end_ms", "enforced")

# A service's breaker decisions as the scaling job keeps them: ((window_end_ms, breaker), ...) by window
# end, where a breaker is the dict of BREAKER_FIELDS of one decision.
Timeline = tuple[tuple[int, dict[str, Any]], ...]


def breaker_of(decision: Mapping[str, Any]) -> dict[str, Any]:
    """What coordination needs of a breaker decision record (stormwatch_breaker_decisions)."""
    return {"decision_id": str(decision["decision_id"]), "state": str(decision["state"]),
            "window_end_ms": int(decision["window_end_ms"]), "enforced": decision.get("enforced") is not False}


def record(timeline: Timeline | None, breaker: Mapping[str, Any]) -> Timeline:
    """The timeline with this decision in it: one per window end (a repeat of a window replaces it)."""
    end = int(breaker["window_end_ms"])
    kept = [(t, b) for t, b in (timeline or ()) if t != end]
    return tuple(sorted(kept + [(end, dict(breaker))], key=lambda tb: tb[0]))


def as_of(timeline: Timeline | None, window_end_ms: int) -> dict[str, Any] | None:
    """The newest decision of a window ending at or before `window_end_ms`; None if there is none."""
    chosen = None
    for t, b in timeline or ():
        if t > window_end_ms:
            break
        chosen = b
    return chosen


def forget_before(timeline: Timeline | None, watermark_ms: int) -> Timeline:
    """Decisions no window after `watermark_ms` can need: all but the newest at or before it."""
    timeline = timeline or ()
    older = [i for i, (t, _) in enumerate(timeline) if t <= watermark_ms]
    return timeline[older[-1]:] if older else timeline


def error_rate(instance_rows: list[Mapping[str, Any]]) -> float | None:
    """The service's error rate in a window: errors / calls over its instance rows; None without calls."""
    calls = sum(int(r.get("calls") or 0) for r in instance_rows)
    return None if calls == 0 else sum(int(r.get("errors") or 0) for r in instance_rows) / calls


def holds_scale_out(breaker: Mapping[str, Any] | None, saturated_without_errors: bool) -> bool:
    """Whether the breaker holds a scale-out in this window (see coordinate)."""
    return (breaker is not None and breaker["enforced"] and breaker["state"] in HOLDS_SCALE_OUT
            and not saturated_without_errors)


def revoke_to(replicas: int, scaled_out_from: int | None, current_replicas: int, min_replicas: int,
              breaker: Mapping[str, Any] | None, saturated_without_errors: bool) -> int | None:
    """The count a pending scale-out is revoked to, or None when nothing is revoked: `replicas` is the
    recommendation in force, `scaled_out_from` the count its scale-outs started from (None: no
    scale-out since the last scale-in or revocation), `current_replicas` the instances observed in the
    window. The count goes back to what runs, never below where the scale-outs started nor
    min_replicas: taking back what was not made yet removes no running replica."""
    if scaled_out_from is None or not holds_scale_out(breaker, saturated_without_errors):
        return None
    target = min(replicas, max(current_replicas, scaled_out_from, min_replicas))
    return target if target < replicas else None


def coordinate(direction: int, saturated: bool, breaker: Mapping[str, Any] | None, window_error_rate: float | None,
               max_error_rate: float) -> tuple[str | None, dict[str, Any]]:
    """(the hold's reason code or None, the decision's `coordination` block without `held` and `revoked`) for a change
    of the replica count in `direction` (> 0 out, < 0 in, 0 none), `saturated` when the window's signal is
    SATURATED_SCALE_OUT."""
    exempt = saturated and window_error_rate is not None and window_error_rate <= max_error_rate
    block = {
        "decisions": [] if breaker is None else [{"decision_type": "breaker", **{k: breaker[k] for k in BREAKER_FIELDS}}],
        "saturation": {"saturated": saturated, "error_rate": window_error_rate, "max_error_rate": max_error_rate,
                       "without_errors": exempt},
    }
    if breaker is None or not breaker["enforced"]:
        return None, block
    if direction > 0 and holds_scale_out(breaker, exempt):
        return BREAKER_OPEN, block
    if direction < 0 and breaker["state"] not in ALLOWS_SCALE_IN:
        return BREAKER_RECOVERING, block
    return None, block
