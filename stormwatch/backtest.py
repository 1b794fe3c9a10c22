"""`stormwatch backtest`: the suspects ranking run offline over trace files.

The files' spans become the windows the job ranks (stormwatch/window_aggregates.py: service and
edge aggregates; stormwatch/traces.py: the assembled traces of the shape signals, a trace in every
window that holds its end), and one SuspectRanker (stormwatch/suspects.py, the job's) ranks them
in order: first the baseline files' windows, which only teach it what normal is, then each
judged file's, continuing from there. One JSON object per judged window: its bounds, the services
ranked with scores, which are flagged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from stormwatch.suspects import SuspectPolicy, SuspectRanker, WindowVerdict
from stormwatch.trace_signals import WindowShape
from stormwatch.traces import assemble, spans_of_file
from stormwatch.window_aggregates import TraceTiming, Window, aggregate, trace_times, window_starts


def windows_of_spans(spans: list, size_s: float, slide_s: float | None = None, traces: bool = True,
                     timing: TraceTiming = TraceTiming()) -> list[Window]:
    """The windows of the spans, oldest first, with their traces when `traces`: each trace in the windows
    of its time as the span path places it (`trace_times`), as its aggregates are."""
    windows = aggregate(spans, size_s, slide_s, timing)
    if not traces:
        return windows
    size_ms = round(size_s * 1000)
    slide_ms = round((slide_s if slide_s is not None else size_s) * 1000)
    by_start = {w.start_ms: w for w in windows}
    times = trace_times(spans, timing)
    for t in assemble(spans):
        for start in window_starts(times[t.trace_id], size_ms, slide_ms):
            if start in by_start:
                by_start[start].traces.append(t)
    return windows


def windows_of_file(path: Path, size_s: float, slide_s: float | None = None, traces: bool = True,
                    timing: TraceTiming = TraceTiming()) -> list[Window]:
    return windows_of_spans(spans_of_file(path), size_s, slide_s, traces, timing)


def rank(ranker: SuspectRanker, windows: Iterable[Window], shape: bool = True) -> list[WindowVerdict]:
    return [ranker.observe(w.services, w.edges, WindowShape.of(w.traces) if shape else None) for w in windows]


def verdict_record(verdict: WindowVerdict, source: str | None = None) -> dict:
    record = {"window_start_ms": verdict.window_start_ms, "window_end_ms": verdict.window_end_ms}
    if source is not None:
        record["file"] = source
    record["threshold"] = round(verdict.threshold, 3)
    record["suspects"] = [{"rank": i, "service": s.service, "score": s.score, "confidence": s.confidence,
                           "flagged": s.flagged, "signal": s.evidence.get("signal")}
                          for i, s in enumerate(verdict.suspects, 1)]
    record["flagged"] = [s.service for s in verdict.flagged]
    return record


def backtest(baselines: list[Path], files: list[Path], policy: SuspectPolicy, size_s: float, slide_s: float | None,
             top: int | None = None, shape: bool = True, timing: TraceTiming = TraceTiming()) -> Iterator[dict]:
    """`shape` False: the window aggregates alone, as the job ranks today (it has no traces yet)."""
    ranker = SuspectRanker(policy)
    for path in baselines:
        rank(ranker, windows_of_file(path, size_s, slide_s, shape, timing), shape)
    for path in files:
        for verdict in rank(ranker, windows_of_file(path, size_s, slide_s, shape, timing), shape):
            record = verdict_record(verdict, str(path))
            if top is not None:
                record["suspects"] = record["suspects"][:top]
            yield record


def main_lines(baselines: list[Path], files: list[Path], policy: SuspectPolicy, size_s: float, slide_s: float | None,
               top: int | None = None, shape: bool = True, timing: TraceTiming = TraceTiming()) -> Iterator[str]:
    for record in backtest(baselines, files, policy, size_s, slide_s, top, shape, timing):
        yield json.dumps(record, sort_keys=False)


__all__ = ["backtest", "rank", "verdict_record", "windows_of_file", "windows_of_spans"]
