"""Retry storms per edge: callers retrying a failing callee multiply its load until it collapses.

An edge caller -> callee is in a storm when, in one health window with at least `min_calls` calls, its
retry amplification (attempts / logical calls, from the span path: stormwatch_edges) is at least
`start_amplification` while the callee is in trouble on that edge: its error rate at least
`min_error_rate`, or its p95 latency at least `latency_rise` times the edge's calm baseline (the p95 of
its last calm window with enough calls). The storm ends once amplification has stayed below
`end_amplification` (hysteresis) for `calm_windows` windows in a row. A window with too few calls
changes nothing.

While an edge is in a storm its retry gate tightens by the measured amplification (entity_control):
the retry budget is divided by it and at most one retry is allowed, so the callers' retries follow the
evidence instead of adding to the load. A decision (RETRY_STORM, STORM_STARTED or STORM_ENDED) is
published when the state changes, with its inputs, thresholds and previous state.

No Flink here: the health job's per-entity step (stormwatch/entity_control.py) calls `step`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.validation import positive_number, section_of, share

CALM, STORM = "CALM", "STORM"
KEYS = ("start_amplification", "end_amplification", "min_error_rate", "latency_rise", "min_calls", "calm_windows")
# A policy document without a [storm] section (one written before storms were decided) gets these:
# config/policy.toml's values.
DEFAULTS = {"start_amplification": 1.5, "end_amplification": 1.2, "min_error_rate": 0.1, "latency_rise": 2.0,
            "min_calls": 20, "calm_windows": 2}


@dataclass(frozen=True)
class StormPolicy:
    start_amplification: float
    end_amplification: float
    min_error_rate: float
    latency_rise: float
    min_calls: int
    calm_windows: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> StormPolicy:
        if d is None:
            d = DEFAULTS
        d = section_of(d, "storm", KEYS)
        values = {k: float(positive_number(d, k, "storm")) for k in
                  ("start_amplification", "end_amplification", "latency_rise")}
        values["min_error_rate"] = share(d, "min_error_rate", "storm")
        values |= {k: int(positive_number(d, k, "storm", integer=True)) for k in ("min_calls", "calm_windows")}
        if values["end_amplification"] < 1 or values["start_amplification"] < values["end_amplification"]:
            raise ValueError("storm.end_amplification: must be ≥ 1 and ≤ start_amplification (hysteresis)")
        if values["latency_rise"] < 1:
            raise ValueError("storm.latency_rise: must be ≥ 1 (a ratio to the calm p95)")
        return cls(**values)


@dataclass(frozen=True)
class StormObservation:
    window_end_ms: int
    calls: int
    errors: int
    retries: int | None
    logical_calls: int | None
    p95_ms: float | None

    @property
    def amplification(self) -> float | None:
        if self.retries is None or not self.logical_calls:
            return None
        return (self.logical_calls + self.retries) / self.logical_calls

    @property
    def error_rate(self) -> float | None:
        # Capped as the health score's: an edge's errors count failures on either side of a call, so a
        # call that failed at both ends counts twice.
        return min(self.errors / self.calls, 1.0) if self.calls else None


@dataclass(frozen=True)
class StormState:
    state: str = CALM
    since_ms: int | None = None          # when the current storm started (its window's end)
    calm_count: int = 0                  # windows in a row below end_amplification, in a storm
    baseline_p95_ms: float | None = None  # the p95 of the last calm window with enough calls


@dataclass(frozen=True)
class StormStep:
    state: StormState
    changed: bool
    previous: str
    reason_code: str | None              # STORM_STARTED | STORM_ENDED when changed
    inputs: dict
    thresholds: dict


def step(state: StormState | None, obs: StormObservation, policy: StormPolicy) -> StormStep:
    state = state or StormState()
    amplification, error_rate = obs.amplification, obs.error_rate
    inputs = {"calls": obs.calls, "errors": obs.errors, "retries": obs.retries, "logical_calls": obs.logical_calls,
              "amplification": None if amplification is None else round(amplification, 6),
              "error_rate": None if error_rate is None else round(error_rate, 6), "p95_ms": obs.p95_ms}
    thresholds = {"start_amplification": policy.start_amplification, "end_amplification": policy.end_amplification,
                  "min_error_rate": policy.min_error_rate, "latency_rise": policy.latency_rise,
                  "baseline_p95_ms": state.baseline_p95_ms, "min_calls": policy.min_calls,
                  "calm_windows": policy.calm_windows}

    def result(new: StormState, reason: str | None) -> StormStep:
        return StormStep(new, new.state != state.state, state.state, reason, inputs, thresholds)

    if obs.calls < policy.min_calls or amplification is None:
        return result(state, None)
    if state.state == CALM:
        slower = (state.baseline_p95_ms is not None and obs.p95_ms is not None
                  and obs.p95_ms >= policy.latency_rise * state.baseline_p95_ms)
        failing = error_rate is not None and error_rate >= policy.min_error_rate
        if amplification >= policy.start_amplification and (failing or slower):
            return result(StormState(STORM, obs.window_end_ms, 0, state.baseline_p95_ms), "STORM_STARTED")
        calm_p95 = obs.p95_ms if obs.p95_ms is not None and not failing else state.baseline_p95_ms
        return result(StormState(CALM, None, 0, calm_p95), None)
    calm_count = state.calm_count + 1 if amplification < policy.end_amplification else 0
    if calm_count >= policy.calm_windows:
        return result(StormState(CALM, None, 0, state.baseline_p95_ms), "STORM_ENDED")
    return result(StormState(STORM, state.since_ms, calm_count, state.baseline_p95_ms), None)


def tightened_budget(budget_retries: int, amplification: float | None) -> int:
    """The retry budget of an edge in a storm: divided by the measured amplification."""
    if amplification is None or amplification <= 1:
        return budget_retries
    return int(budget_retries // amplification)
