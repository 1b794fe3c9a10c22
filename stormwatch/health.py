"""Rolling health scores of services, instances and edges from one window's RED figures.

score = w_lat·(1 − min(p95 / latency_cap_ms, 1)) + w_err·(1 − error_rate) + w_load·(1 − clamp(load_ratio, 0, 1))

A term whose input is missing (no load ratio for an edge or a service without metrics, no p95 when the
window has no latency histogram) is dropped and the weights of the present terms are renormalised to sum
to 1, so a score is always on [0, 1] and comparable with the thresholds whatever the entity reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stormwatch.validation import positive_number, section_of

ENTITY_KINDS = ("service", "instance", "edge")
TERMS = ("latency", "errors", "load")


@dataclass(frozen=True)
class HealthPolicy:
    window_size_seconds: int
    window_slide_seconds: int
    min_calls: int
    weights: Mapping[str, float]
    latency_cap_ms: float

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HealthPolicy:
        d = section_of(d, "health", ("window_size_seconds", "window_slide_seconds", "min_calls", "weights",
                                     "latency_cap_ms"))
        size = positive_number(d, "window_size_seconds", "health", integer=True)
        slide = positive_number(d, "window_slide_seconds", "health", integer=True)
        if slide > size:
            raise ValueError(f"health.window_slide_seconds: {slide} is larger than window_size_seconds {size}")
        weights = section_of(d["weights"], "health.weights", TERMS)
        for term in TERMS:
            positive_number(weights, term, "health.weights", allow_zero=True)
        if sum(weights.values()) <= 0:
            raise ValueError("health.weights: at least one weight must be > 0")
        return cls(size, slide, positive_number(d, "min_calls", "health", integer=True),
                   {t: float(weights[t]) for t in TERMS},
                   float(positive_number(d, "latency_cap_ms", "health")))


@dataclass(frozen=True)
class HealthInputs:
    """One window's figures for one entity; caller/callee only for edges, instance only for instances."""
    entity_kind: str
    entity_key: str
    service: str | None
    instance: str | None
    caller: str | None
    callee: str | None
    window_start_ms: int
    window_end_ms: int
    calls: int
    errors: int
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    load_ratio: float | None = None
    example_trace_ids: list[str] = field(default_factory=list)
    # Edges only: the attempts that were retries, and the logical calls (calls less retries).
    retries: int | None = None
    logical_calls: int | None = None

    def __post_init__(self):
        if self.entity_kind not in ENTITY_KINDS:
            raise ValueError(f"entity_kind: expected one of {ENTITY_KINDS}, got {self.entity_kind!r}")


@dataclass(frozen=True)
class HealthScore:
    status: str                     # OK | INSUFFICIENT_DATA
    score: float | None             # None when INSUFFICIENT_DATA
    error_rate: float | None        # None without calls
    terms: dict[str, float]         # each present term's value on [0, 1], before weighting
    weights: dict[str, float]       # the weights used, renormalised over the present terms


def score(inputs: HealthInputs, policy: HealthPolicy) -> HealthScore:
    """The entity's health in the window. Fewer than min_calls calls: INSUFFICIENT_DATA, no score.
    Missing inputs (p95 or load_ratio None) drop their term and the others' weights are renormalised."""
    error_rate = min(inputs.errors / inputs.calls, 1.0) if inputs.calls > 0 else None
    if inputs.calls < policy.min_calls:
        return HealthScore("INSUFFICIENT_DATA", None, error_rate, {}, {})
    terms = {"errors": 1.0 - error_rate}
    if inputs.p95_ms is not None:
        terms["latency"] = 1.0 - min(max(inputs.p95_ms, 0.0) / policy.latency_cap_ms, 1.0)
    if inputs.load_ratio is not None:
        terms["load"] = 1.0 - min(max(inputs.load_ratio, 0.0), 1.0)
    total = sum(policy.weights[t] for t in terms)
    if total <= 0:
        # Only zero-weight terms are present: the error term alone decides.
        weights = {t: (1.0 if t == "errors" else 0.0) for t in terms}
    else:
        weights = {t: policy.weights[t] / total for t in terms}
    value = sum(weights[t] * terms[t] for t in terms)
    return HealthScore("OK", min(max(value, 0.0), 1.0), error_rate, terms, weights)
