"""Explicit-bucket histograms (OTLP semantics) read at the project's own bucket bounds.

An instance's metrics carry per-bucket counts over bounds of its own choosing: bucket i counts the
values in (bounds[i-1], bounds[i]], the last one those above every bound. The pipelines add up
histograms of different instances and of spans, so each is first turned into cumulative counts at
one shared set of bounds (Prometheus' `le` buckets). A bucket whose upper bound is above a target
bound is not counted at it: when the bounds do not line up, the figure errs towards slower.
`quantile_from_cumulative` reads a quantile back from such cumulative counts.
"""

from __future__ import annotations

from collections.abc import Sequence


def cumulative_at(bounds: Sequence[float], counts: Sequence[int], targets: Sequence[float]) -> list[int] | None:
    """Cumulative counts at each target bound; None when the histogram is malformed."""
    if bounds is None or counts is None or len(counts) != len(bounds) + 1:
        return None
    if any(b is None for b in bounds) or any(c is None or c < 0 for c in counts):
        return None
    if any(later <= earlier for earlier, later in zip(bounds, bounds[1:])):
        return None
    out, total, i = [], 0, 0
    for target in targets:
        while i < len(bounds) and bounds[i] <= target:
            total += counts[i]
            i += 1
        out.append(total)
    return out


def quantile_from_cumulative(bounds_ms: Sequence[float], cumulative_counts: Sequence[int], q: float,
                             total: int | None = None) -> float | None:
    """The q-quantile of a histogram given as cumulative counts at ascending upper bounds (Prometheus
    `le`), interpolated linearly inside its bucket (the first bucket starts at 0). `total` counts the
    calls above the last bound too (default: none are); a quantile among those is the last bound, as
    histogram_quantile does. None without calls."""
    total = cumulative_counts[-1] if total is None and cumulative_counts else total
    if not cumulative_counts or len(bounds_ms) != len(cumulative_counts) or not total or total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0
    for bound, count in zip(bounds_ms, cumulative_counts):
        if count >= rank and count > below:
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return float(bounds_ms[-1])
