"""Assembled traces and the per-trace facts the shape signals (stormwatch/trace_signals.py) count.

Plain Python, no Flink: the reference of what the JVM's TraceFacts must emit per trace for the
shape signals, and what `stormwatch backtest` computes from files.

Input: spans, deduplicated on (trace id, span id), the first occurrence winning; a trace is the
spans of one trace id. In a trace, a span's *parent* is the span whose id is its parent span id.

Visits. A *visit* is one request's stay in one service: a span whose parent is absent or in another
service (its *entry*), with every descendant reached without leaving the service. Per visit:

- ``service``, ``operation``: the entry span's service and name;
- ``duration_ms``: the entry span's duration;
- ``own_ms``: what the visit adds itself: its entry's duration minus the union of the intervals of
  its *exits* (its spans that have a child in another service: CLIENT spans, producers) clipped to
  the entry, plus ``inbound_gap_ms`` below. An exit's exclusive time (network and the callee's
  queue) belongs to the callee, as in stormwatch/suspects.py;
- ``inbound_gap_ms``: for a CLIENT parent of a SERVER entry, max(0, parent duration − entry
  duration); else 0;
- ``calls``: the visits that are its direct children (their entry's parent is in this visit), as
  (callee service, callee operation, the exit's end), in order of the exits' end;
- ``error``: some span of the visit is in error; ``error_origins``: the visit's error spans none of
  whose children is in error;
- ``error_after``: the callee service of the visit's last call whose exit ended at or before the end
  of the visit's first error origin — the answer the visit failed right after (None without error
  origin, or without a call ended before it). Evidence against that callee.

Traces. Per trace: its visits; ``root``: the visit of a span without parent (the earliest-starting
if several; None for a trace that lost its root); ``entry``: the request type, the root's
(service, operation) and, when the root calls other services, the (service, operation) of its
earliest-starting call — a gateway's root span is often named by a generic route, what it forwards
to is the request type; ``duration_ms``: the root's duration; ``error``: a span of the trace is in
error; ``end_ms``: the latest span end, the trace's event time (its window).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from connectors.trace_formats import SPAN_KIND_CLIENT, SPAN_KIND_SERVER, STATUS_CODE_ERROR, read_requests

NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    service_name: str
    name: str
    kind: int
    error: bool
    start: int
    end: int
    # http.request.resend_count: how often the client had sent the request before (None: absent).
    resend_count: int | None = None


def spans_of_request(request: dict) -> Iterator[Span]:
    for rs in request.get("resourceSpans", []):
        attrs = {a["key"]: a["value"].get("stringValue") for a in rs.get("resource", {}).get("attributes", [])}
        service = attrs.get("service.name") or "unknown_service"
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                yield Span(
                    trace_id=s["traceId"].lower(),
                    span_id=s["spanId"].lower(),
                    parent_span_id=(s.get("parentSpanId") or "").lower() or None,
                    service_name=service,
                    name=s.get("name", ""),
                    kind=int(s.get("kind", 0)),
                    error=s.get("status", {}).get("code") in (STATUS_CODE_ERROR, "STATUS_CODE_ERROR"),
                    start=int(s["startTimeUnixNano"]),
                    end=int(s["endTimeUnixNano"]),
                    resend_count=resend_count(s.get("attributes", [])),
                )


def resend_count(attributes: list[dict]) -> int | None:
    """A span's http.request.resend_count (OTLP JSON writes int64 as a string), if it is a count."""
    for a in attributes:
        if a.get("key") == "http.request.resend_count":
            try:
                n = int(a.get("value", {}).get("intValue"))
            except (TypeError, ValueError):
                return None
            return n if n >= 0 else None
    return None


def spans_of_file(path: Path) -> list[Span]:
    """Every span of a trace file (OTLP JSON lines, Zipkin v2 or Jaeger JSON)."""
    return [span for request in read_requests(Path(path)) for span in spans_of_request(request)]


@dataclass(frozen=True)
class Call:
    callee: str
    operation: str
    end_ms: float


@dataclass(frozen=True)
class Visit:
    service: str
    operation: str
    entry_span_id: str
    start_ms: float
    duration_ms: float
    own_ms: float
    inbound_gap_ms: float
    calls: tuple[Call, ...]
    error: bool
    error_origins: int
    error_after: str | None


@dataclass(frozen=True)
class Trace:
    trace_id: str
    visits: tuple[Visit, ...]
    root: Visit | None
    entry: tuple[str, ...]
    duration_ms: float | None
    error: bool
    end_ms: int


def _union_ns(lo: int, hi: int, intervals: Iterable[tuple[int, int]]) -> int:
    covered, reach = 0, lo
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in intervals):
        a = max(a, reach)
        if b > a:
            covered += b - a
            reach = b
    return covered


def assemble(spans: Iterable[Span]) -> list[Trace]:
    """The traces of the spans (deduplicated), ordered by end then id."""
    by_trace: dict[str, dict[str, Span]] = defaultdict(dict)
    for s in spans:
        by_trace[s.trace_id].setdefault(s.span_id, s)
    traces = [trace_of(trace_id, list(members.values())) for trace_id, members in by_trace.items()]
    return sorted(traces, key=lambda t: (t.end_ms, t.trace_id))


def trace_of(trace_id: str, spans: list[Span]) -> Trace:
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        if s.parent_span_id in by_id and s.parent_span_id != s.span_id:
            children[s.parent_span_id].append(s)
    for kids in children.values():
        kids.sort(key=lambda c: (c.start, c.span_id))

    def parent(s: Span) -> Span | None:
        return by_id.get(s.parent_span_id) if s.parent_span_id != s.span_id else None

    entries = sorted((s for s in spans if parent(s) is None or parent(s).service_name != s.service_name),
                     key=lambda s: (s.start, s.span_id))
    visits: dict[str, Visit] = {}
    for entry in entries:
        members, stack, seen = [], [entry], {entry.span_id}
        while stack:
            s = stack.pop()
            members.append(s)
            for c in children.get(s.span_id, []):
                if c.service_name == entry.service_name and c.span_id not in seen:
                    seen.add(c.span_id)
                    stack.append(c)
        exits = [(s, c) for s in members for c in children.get(s.span_id, []) if c.service_name != entry.service_name]
        exits.sort(key=lambda e: (e[0].end, e[1].start, e[1].span_id))
        origins = sorted((s for s in members if s.error and not any(c.error for c in children.get(s.span_id, []))),
                         key=lambda s: (s.end, s.span_id))
        error_after = None
        if origins:
            before = [c for s, c in exits if s.end <= origins[0].end and s is not origins[0]]
            error_after = before[-1].service_name if before else None
        p = parent(entry)
        gap_ns = max(0, (p.end - p.start) - (entry.end - entry.start)) if (
            p is not None and p.kind == SPAN_KIND_CLIENT and entry.kind == SPAN_KIND_SERVER) else 0
        exit_spans = {s.span_id: s for s, _ in exits}
        busy = _union_ns(entry.start, entry.end, ((s.start, s.end) for s in exit_spans.values()))
        visits[entry.span_id] = Visit(
            service=entry.service_name,
            operation=entry.name,
            entry_span_id=entry.span_id,
            start_ms=entry.start / NS_PER_MS,
            duration_ms=(entry.end - entry.start) / NS_PER_MS,
            own_ms=(max(0, entry.end - entry.start - busy) + gap_ns) / NS_PER_MS,
            inbound_gap_ms=gap_ns / NS_PER_MS,
            calls=tuple(Call(c.service_name, c.name, s.end / NS_PER_MS) for s, c in exits),
            error=any(s.error for s in members),
            error_origins=len(origins),
            error_after=error_after,
        )
    roots = [v for v in visits.values() if parent(by_id[v.entry_span_id]) is None and by_id[v.entry_span_id].parent_span_id is None]
    root = roots[0] if roots else None
    entry_key: tuple[str, ...] = ()
    if root is not None:
        entry_key = (root.service, root.operation)
        if root.calls:
            first = min((visits[c.span_id] for c in _calls_of(root, by_id, children)),
                        key=lambda v: (v.start_ms, v.entry_span_id), default=None)
            if first is not None:
                entry_key += (first.service, first.operation)
    return Trace(
        trace_id=trace_id,
        visits=tuple(visits[e.span_id] for e in entries),
        root=root,
        entry=entry_key,
        duration_ms=root.duration_ms if root else None,
        error=any(s.error for s in spans),
        end_ms=max(s.end for s in spans) // NS_PER_MS,
    )


def _calls_of(visit: Visit, by_id: dict[str, Span], children: dict[str, list[Span]]) -> list[Span]:
    """The entry spans of the visits `visit` calls."""
    out, stack = [], [by_id[visit.entry_span_id]]
    while stack:
        s = stack.pop()
        for c in children.get(s.span_id, []):
            if c.service_name == visit.service:
                stack.append(c)
            else:
                out.append(c)
    return out
