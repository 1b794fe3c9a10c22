"""QPS–latency Pareto fronts of a service's instances in one window.

Each instance is a point (QPS over the window, latency at the policy's quantile). A point dominates
another when it has at least the QPS and at most the latency, and is better in one of them; the front
is the set of points no other point dominates: the best latency the service achieved at each load.

Before the front is taken, points that would only add noise are excluded, with a reason code checked
in this order: TOO_FEW_CALLS (calls < min_calls_per_instance), WARMING_UP (seen for less than
warmup_seconds at the window's end: caches and JITs still cold), NO_LATENCY (no quantile, or not finite).

The front is found by one sweep after sorting by QPS descending, latency ascending, instance name: a
point is on the front when its latency is strictly below every latency seen before it. That is
O(n log n) and, with instance names unique, independent of the order of the input.

- Exact duplicates (same QPS and latency) do not strictly dominate one another; the first by instance
  name is on the front and represents them, the others are dominated with reason DUPLICATE_OF. This
  keeps one point per position, so max_qps and min_latency are single points.
- A dominated point names one front point that dominates it, `dominated_by`: among those, the one with
  the lowest latency, which is the front point at the smallest QPS at or above its own (its nearest
  peer carrying as much load). Reason DOMINATED, or DUPLICATE_OF when that point is identical to it.
- `points` (the front) is sorted by QPS ascending, so latency ascends along it too; `dominated` and
  `excluded` are sorted by instance name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from stormwatch.validation import positive_number, section_of

QUANTILES = ("p99", "p95")
TOO_FEW_CALLS, WARMING_UP, NO_LATENCY = "TOO_FEW_CALLS", "WARMING_UP", "NO_LATENCY"
DOMINATED, DUPLICATE_OF = "DOMINATED", "DUPLICATE_OF"


@dataclass(frozen=True)
class FrontPolicy:
    latency_quantile: str
    min_calls_per_instance: int
    warmup_seconds: float

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FrontPolicy:
        d = section_of(d, "pareto", ("latency_quantile", "min_calls_per_instance", "warmup_seconds"))
        if d["latency_quantile"] not in QUANTILES:
            raise ValueError(f"pareto.latency_quantile: expected one of {', '.join(QUANTILES)}, "
                             f"got {d['latency_quantile']!r}")
        return cls(d["latency_quantile"],
                   int(positive_number(d, "min_calls_per_instance", "pareto", integer=True)),
                   float(positive_number(d, "warmup_seconds", "pareto", allow_zero=True)))


@dataclass(frozen=True)
class InstancePoint:
    instance: str
    qps: float
    latency_ms: float | None
    calls: int
    first_seen_ms: int


@dataclass(frozen=True)
class Dominated:
    point: InstancePoint
    dominated_by: InstancePoint
    reason: str             # DOMINATED | DUPLICATE_OF


@dataclass(frozen=True)
class Excluded:
    point: InstancePoint
    reason: str             # TOO_FEW_CALLS | WARMING_UP | NO_LATENCY


@dataclass(frozen=True)
class Front:
    service: str
    window_start_ms: int
    window_end_ms: int
    latency_quantile: str
    points: tuple[InstancePoint, ...]       # the front, QPS ascending (latency ascending too)
    dominated: tuple[Dominated, ...]
    excluded: tuple[Excluded, ...]

    @property
    def max_qps(self) -> InstancePoint | None:
        """The front point carrying the most load (and so the highest latency on the front)."""
        return self.points[-1] if self.points else None

    @property
    def min_latency(self) -> InstancePoint | None:
        return self.points[0] if self.points else None

    def to_dict(self) -> dict[str, Any]:
        def point(p: InstancePoint | None) -> dict[str, Any] | None:
            return None if p is None else asdict(p)

        return {
            "service": self.service,
            "window_start_ms": self.window_start_ms,
            "window_end_ms": self.window_end_ms,
            "latency_quantile": self.latency_quantile,
            "front": [point(p) for p in self.points],
            "dominated": [{"point": point(d.point), "dominated_by": d.dominated_by.instance, "reason": d.reason}
                          for d in self.dominated],
            "excluded": [{"point": point(e.point), "reason": e.reason} for e in self.excluded],
            "max_qps": point(self.max_qps),
            "min_latency": point(self.min_latency),
            "counts": {"instances": len(self.points) + len(self.dominated) + len(self.excluded),
                       "front": len(self.points), "dominated": len(self.dominated), "excluded": len(self.excluded)},
        }


def _exclusion(p: InstancePoint, window_end_ms: int, policy: FrontPolicy) -> str | None:
    if p.calls < policy.min_calls_per_instance:
        return TOO_FEW_CALLS
    if window_end_ms - p.first_seen_ms < policy.warmup_seconds * 1000:
        return WARMING_UP
    if p.latency_ms is None or not math.isfinite(p.latency_ms):
        return NO_LATENCY
    return None


def front(service: str, window_start_ms: int, window_end_ms: int, points: list[InstancePoint],
          policy: FrontPolicy) -> Front:
    """The window's front; ValueError when two points share an instance name (ties would then depend
    on the input order)."""
    names = {p.instance for p in points}
    if len(names) != len(points):
        raise ValueError(f"{service}: instance names must be unique within a window")
    excluded, eligible = [], []
    for p in points:
        reason = _exclusion(p, window_end_ms, policy)
        if reason is None:
            eligible.append(p)
        else:
            excluded.append(Excluded(p, reason))
    on_front, dominated = [], []
    for p in sorted(eligible, key=lambda p: (-p.qps, p.latency_ms, p.instance)):
        # on_front[-1] holds the lowest latency so far, at a QPS at or above p's.
        if not on_front or p.latency_ms < on_front[-1].latency_ms:
            on_front.append(p)
            continue
        best = on_front[-1]
        same = best.qps == p.qps and best.latency_ms == p.latency_ms
        dominated.append(Dominated(p, best, DUPLICATE_OF if same else DOMINATED))
    return Front(service, window_start_ms, window_end_ms, policy.latency_quantile, tuple(reversed(on_front)),
                 tuple(sorted(dominated, key=lambda d: d.point.instance)),
                 tuple(sorted(excluded, key=lambda e: e.point.instance)))
