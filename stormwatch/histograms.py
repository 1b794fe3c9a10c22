"""Explicit-bucket histograms (OTLP semantics) read at the project's own bucket bounds.

An instance's metrics carry per-bucket counts over bounds of its own choosing: bucket i counts the
values in (bounds[i-1], bounds[i]], the last one those above every bound. The pipelines add up
histograms of different instances and of spans, so each is first turned into cumulative counts at
one shared set of bounds (Prometheus' `le` buckets). A bucket whose upper bound is above a target
bound is not counted at it: when the bounds do not line up, the figure errs towards slower.
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
