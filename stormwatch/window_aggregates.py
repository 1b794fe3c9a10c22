"""The per-window aggregates Flink SQL computes from spans, in plain Python: the reference the Flink
SQL implementation is checked against (reference/trace_windows.py), and what `stormwatch backtest` ranks.

Input: spans (any objects with the fields of stormwatch.traces.Span), deduplicated on (trace_id, span_id) — the first occurrence
wins, because some exports repeat a span verbatim.

Structure, over the whole input (not only one window):
- the *children* of a span are the spans of the same trace whose parent_span_id is its span_id;
- its *parent* is the span of the same trace whose span_id is its parent_span_id (may be absent).
- duration(s) = (end - start) in ms, as a float.

Windows: event time is a *trace's time* in epoch milliseconds (what a TIMESTAMP_LTZ(3) holds): its end,
the latest end of its spans (copies included), ``end // 1_000_000``; for a trace without a root span,
which the span path holds `root_wait` after its end instead of the quiet time, that less the quiet time
(at most `max_hold` after its first span's end, less the quiet time): `trace_times`. Everything a trace
yields falls in the windows of its time, when it is whole, so a window closes once the traces that
ended in it are quiet, however long one of them ran (the span path's assembler, udfs/traces: TraceFacts). Windows are aligned on the epoch like Flink's TUMBLE / HOP without offset:
a window of `size` ms with `slide` ms covers [k*slide, k*slide + size) for integer k, and an item
belongs to every window whose interval holds its event time (tumbling: slide = size).

Items: a *span*, and a *cross-service pair* (a parent span in service A with a child span in service
B, A != B), are windowed by their trace's end. So a CLIENT span's exclusive time (its caller's self
time) and its pair's gap always fall in the same window.

ServiceWindow, key = service; emitted for a (service, window) with at least one of its spans or
one pair into it (the two aggregations full-outer-joined; a side without items gives zeros / None):
- spans: its spans; server_spans: those of kind SERVER (2); errors: those in error;
- error_origins: spans in error none of whose children is in error;
- server_p50_ms / server_p95_ms: percentile of the SERVER spans' durations, linear interpolation
  between closest ranks at position q*(n-1) (Flink's PERCENTILE, numpy's default); None without
  SERVER spans;
- self_ms_total: sum of exclusive times, exclusive(s) = duration(s) minus the length of the union of
  its children's intervals clipped to [s.start, s.end], clamped at >= 0;
- inbound_calls / inbound_gap_ms_total: over the pairs CLIENT (3) parent -> SERVER (2) child whose
  child is in this service: their count and the sum of max(0, duration(parent) - duration(child)).

EdgeWindow, key = (parent's service, child's service), over all cross-service pairs (any kinds):
- calls: the pairs; client_errors: those whose parent is in error; server_errors: those whose
  child is in error; gap_ms_total: sum of max(0, duration(parent) - duration(child)) over the pairs
  CLIENT (3) parent -> SERVER (2) child (an RPC's network and queueing time; a message, or a hop
  through an uninstrumented proxy, has no such gap);
- retries: the pairs whose *attempt* repeats an earlier attempt of the same logical call. A pair's
  attempt is its parent when that is a CLIENT span, else its child; attempts (distinct spans) with the
  same parent span (not none), the same name and the same callee service are attempts of one call, and
  one is a retry when an earlier attempt of its call, ordered by (start, span id), had failed or had not
  ended by the time it started (a hedged call). Repeating a call after a success is another call.
  Where the attempt carries `http.request.resend_count`, that decides: 0 is a first try, more is a retry
  unless an earlier attempt of its call is in the trace and had succeeded before it started (a
  redirect), so a retry whose earlier attempts were not exported still counts.
So the CLIENT→SERVER edges into a service add up to its inbound_calls and inbound_gap_ms_total.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from stormwatch.suspects import EdgeWindow, ServiceWindow

SERVER, CLIENT = 2, 3
NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Window:
    """The records of one window, as the ranker receives them."""

    start_ms: int
    end_ms: int
    services: list[ServiceWindow]
    edges: list[EdgeWindow]
    # The window's assembled traces (stormwatch.traces.Trace), when the shape signals are wanted.
    traces: list = field(default_factory=list)


@dataclass(frozen=True)
class TraceTiming:
    """How long the span path holds a trace ([pipeline.topology] trace_quiet_seconds,
    trace_root_wait_seconds, trace_max_hold_seconds), in seconds: where its facts are placed."""

    quiet_s: float = 5.0
    root_wait_s: float = 30.0
    max_hold_s: float = 60.0

    @classmethod
    def of(cls, topology: Mapping) -> "TraceTiming":
        return cls(float(topology["trace_quiet_seconds"]), float(topology["trace_root_wait_seconds"]),
                   float(topology["trace_max_hold_seconds"]))


def trace_times(spans: Iterable, timing: TraceTiming = TraceTiming()) -> dict[str, int]:
    """Trace id -> the trace's time in ms: its latest span end, or, without a root span, when the span
    path gives up waiting for it (root_wait after that end, max_hold after the first) less the quiet time."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    rooted: set[str] = set()
    for s in spans:
        end = s.end // NS_PER_MS
        first[s.trace_id] = min(first.get(s.trace_id, end), end)
        last[s.trace_id] = max(last.get(s.trace_id, end), end)
        if s.parent_span_id is None:
            rooted.add(s.trace_id)
    quiet, root_wait = round(timing.quiet_s * 1000), round(max(timing.root_wait_s, timing.quiet_s) * 1000)
    max_hold = round(timing.max_hold_s * 1000)
    return {t: max(end, min(end + (quiet if t in rooted else root_wait), first[t] + max_hold) - quiet)
            for t, end in last.items()}


def dedupe(spans: Iterable) -> list:
    seen: dict = {}
    for s in spans:
        seen.setdefault((s.trace_id, s.span_id), s)
    return list(seen.values())


def duration_ms(s) -> float:
    return (s.end - s.start) / NS_PER_MS


def exclusive_ns(span, children: list) -> int:
    """Duration minus the union of the children's intervals clipped to the span's own interval."""
    covered, reach = 0, span.start
    for lo, hi in sorted((max(c.start, span.start), min(c.end, span.end)) for c in children):
        lo = max(lo, reach)
        if hi > lo:
            covered += hi - lo
            reach = hi
    return max(0, span.end - span.start - covered)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def window_starts(event_ms: int, size_ms: int, slide_ms: int) -> list[int]:
    """Starts of the windows [k*slide, k*slide + size) that hold event_ms, oldest first."""
    last = event_ms - event_ms % slide_ms
    return [start for start in range(last - (size_ms - 1) // slide_ms * slide_ms, last + 1, slide_ms) if start + size_ms > event_ms]


def gap_ms(pair: tuple) -> float:
    parent, child = pair
    return max(0.0, duration_ms(parent) - duration_ms(child))


def aggregate(spans: Iterable, size_s: float, slide_s: float | None = None,
              timing: TraceTiming = TraceTiming()) -> list[Window]:
    """The windows (oldest first) of ServiceWindow and EdgeWindow records, each sorted by key."""
    size_ms = round(size_s * 1000)
    slide_ms = round((slide_s if slide_s is not None else size_s) * 1000)
    spans = list(spans)
    times = trace_times(spans, timing)
    spans = dedupe(spans)
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    children: dict[tuple[str, str], list] = defaultdict(list)
    for s in spans:
        if s.parent_span_id is not None:
            children[(s.trace_id, s.parent_span_id)].append(s)

    own: dict[tuple[int, str], list] = defaultdict(list)
    inbound: dict[tuple[int, str], list[tuple]] = defaultdict(list)
    pairs: dict[tuple[int, str, str], list[tuple]] = defaultdict(list)
    for s in spans:
        starts = window_starts(times[s.trace_id], size_ms, slide_ms)
        for start in starts:
            own[(start, s.service_name)].append(s)
        parent = by_id.get((s.trace_id, s.parent_span_id)) if s.parent_span_id else None
        if parent is None or parent.service_name == s.service_name:
            continue
        for start in starts:
            pairs[(start, parent.service_name, s.service_name)].append((parent, s))
            if parent.kind == CLIENT and s.kind == SERVER:
                inbound[(start, s.service_name)].append((parent, s))

    retries = retry_attempts({(p.trace_id, p.span_id, c.span_id): (p, c) for edge in pairs.values()
                              for p, c in edge}.values())

    def retried(pair: tuple) -> bool:
        parent, child = pair
        attempt = parent if parent.kind == CLIENT else child
        return (attempt.trace_id, attempt.span_id, child.service_name) in retries

    windows: dict[int, Window] = {}
    for start, service in sorted(own.keys() | inbound.keys()):
        members, calls = own.get((start, service), []), inbound.get((start, service), [])
        server = [duration_ms(s) for s in members if s.kind == SERVER]
        record = ServiceWindow(
            service=service,
            window_start_ms=start,
            window_end_ms=start + size_ms,
            spans=len(members),
            server_spans=len(server),
            errors=sum(s.error for s in members),
            error_origins=sum(s.error and not any(c.error for c in children[(s.trace_id, s.span_id)]) for s in members),
            server_p50_ms=percentile(server, 0.5) if server else None,
            server_p95_ms=percentile(server, 0.95) if server else None,
            self_ms_total=sum(exclusive_ns(s, children[(s.trace_id, s.span_id)]) for s in members) / NS_PER_MS,
            inbound_calls=len(calls),
            inbound_gap_ms_total=sum(map(gap_ms, calls)),
        )
        windows.setdefault(start, Window(start, start + size_ms, [], [])).services.append(record)
    for (start, caller, callee), edge in sorted(pairs.items()):
        windows[start].edges.append(
            EdgeWindow(
                caller=caller,
                callee=callee,
                window_start_ms=start,
                window_end_ms=start + size_ms,
                calls=len(edge),
                client_errors=sum(p.error for p, _ in edge),
                server_errors=sum(c.error for _, c in edge),
                retries=sum(map(retried, edge)),
                gap_ms_total=sum(gap_ms(pair) for pair in edge if pair[0].kind == CLIENT and pair[1].kind == SERVER),
            )
        )
    return [windows[start] for start in sorted(windows)]


def retry_attempts(pairs: Iterable[tuple]) -> set[tuple[str, str, str]]:
    """The attempts that are retries, as (trace id, attempt span id, callee service), among the
    cross-service (parent, child) pairs of whole traces (see the module docstring)."""
    calls: dict[tuple, dict[str, object]] = defaultdict(dict)
    for parent, child in pairs:
        attempt = parent if parent.kind == CLIENT else child
        if attempt.parent_span_id is None or attempt.parent_span_id == attempt.span_id:
            continue
        key = (attempt.trace_id, attempt.parent_span_id, attempt.name, child.service_name)
        calls[key].setdefault(attempt.span_id, attempt)
    retries = set()
    for (trace_id, _, _, callee), attempts in calls.items():
        failed, in_flight_until, earlier = False, None, False
        for a in sorted(attempts.values(), key=lambda a: (a.start, a.span_id)):
            after_trouble = failed or (in_flight_until is not None and in_flight_until > a.start)
            resends = getattr(a, "resend_count", None)
            if after_trouble if resends is None else resends > 0 and (not earlier or after_trouble):
                retries.add((trace_id, a.span_id, callee))
            earlier = True
            failed = failed or a.error
            in_flight_until = a.end if in_flight_until is None else max(in_flight_until, a.end)
    return retries
