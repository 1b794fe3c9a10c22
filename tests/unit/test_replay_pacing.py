"""The pure parts of replaying trace files (stormwatch/replay.py): pace, due times, pacing against a
clock, rebasing to now, Collector-like re-batching and the progress line."""

from __future__ import annotations

import copy
import json

import pytest

from connectors.otlp import encode_json
from stormwatch.replay import (batch_requests, collector_batches, due_s, first_end, last_end, paced,
                               parse_pace, rebase, rebase_delta, render_progress)

S = 1_000_000_000
T0 = 1_674_982_200 * S


@pytest.mark.parametrize(("text", "speed"), [("fast", None), ("original", 1.0), ("10", 10.0), ("0.5", 0.5)])
def test_parse_pace(text, speed):
    assert parse_pace(text) == speed


@pytest.mark.parametrize("text", ["0", "-2", "slow", "", "nan", "Fast"])
def test_parse_pace_refuses_anything_else_naming_it(text):
    with pytest.raises(ValueError, match=f"fast, original or a positive factor, not {text!r}"):
        parse_pace(text)


@pytest.mark.parametrize(("event_ns", "speed", "due"), [
    (T0 + 3 * S, None, 0.0), (T0 + 3 * S, 1.0, 3.0), (T0 + 3 * S, 10.0, 0.3), (T0 + S // 2, 0.5, 1.0),
    (T0 - S, 1.0, 0.0),  # earlier than the first: due at once
])
def test_due_s(event_ns, speed, due):
    assert due_s(event_ns, T0, speed) == pytest.approx(due)


class FakeClock:
    """A monotonic clock that only moves when slept on or told to."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


EVENTS = [T0, T0 + S, T0 + S, T0 + 4 * S, T0 + 2 * S, T0 + 6 * S]  # one late item, due already


@pytest.mark.parametrize(("speed", "work_s"), [(1.0, 0.0), (4.0, 0.0), (1.0, 0.25), (0.5, 0.1)])
def test_paced_sleeps_add_up_to_the_event_span_over_the_speed(speed, work_s):
    clock = FakeClock()
    started = clock.now
    yielded = []
    for event in paced(EVENTS, lambda e: e, speed, clock=clock, sleep=clock.sleep):
        # Every item comes once it is due, not before.
        assert clock.now - started >= due_s(event, EVENTS[0], speed) - 1e-9
        yielded.append(event)
        clock.now += work_s  # the caller's own time counts towards the next wait
    assert yielded == EVENTS
    assert all(s > 0 for s in clock.sleeps)
    assert sum(clock.sleeps) + work_s * (len(EVENTS) - 1) == pytest.approx((EVENTS[-1] - EVENTS[0]) / S / speed)


def test_paced_fast_never_sleeps():
    clock = FakeClock()
    assert list(paced(EVENTS, lambda e: e, None, clock=clock, sleep=clock.sleep)) == EVENTS
    assert clock.sleeps == []


def _span(span_id: str, end_s: float, start_s: float | None = None, events: tuple[float, ...] = ()) -> dict:
    start = T0 + round((end_s - 0.05 if start_s is None else start_s) * S)
    span = {"traceId": "ab" * 16, "spanId": span_id, "name": span_id, "kind": 2,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(T0 + round(end_s * S)), "status": {}}
    if events:
        span["events"] = [{"timeUnixNano": str(T0 + round(t * S)), "name": "e"} for t in events]
    return span


def _request(*groups: tuple[str, str, list[dict]]) -> dict:
    by_service: dict[str, list] = {}
    for service, scope, spans in groups:
        by_service.setdefault(service, []).append({"scope": {"name": scope} if scope else {}, "spans": spans})
    return {"resourceSpans": [
        {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}, "scopeSpans": ss}
        for service, ss in by_service.items()]}


def _times(requests) -> list[int]:
    return [int(s[k]) for r in requests for rs in r["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
            for k in ("startTimeUnixNano", "endTimeUnixNano")] + [
        int(e["timeUnixNano"]) for r in requests for rs in r["resourceSpans"] for ss in rs["scopeSpans"]
        for s in ss["spans"] for e in s.get("events", [])]


def test_rebase_moves_every_time_so_that_the_first_span_ends_now():
    requests = [_request(("a", "", [_span("1", 5.0, events=(4.97,)), _span("2", 2.0, start_s=1.0)])),
                _request(("b", "lib", [_span("3", 9.5, events=(9.0, 9.4))]))]
    before = _times(requests)
    now = T0 + 3600 * S
    delta = rebase_delta(requests, now)
    assert delta == now - (T0 + 2 * S)
    moved = [rebase(r, delta) for r in copy.deepcopy(requests)]
    assert first_end(moved) == now
    assert _times(moved) == [t + delta for t in before]  # gaps kept, events moved with their spans
    assert last_end(moved[1]) == T0 + round(9.5 * S) + delta
    # In place, and times stay OTLP/JSON strings.
    request = copy.deepcopy(requests[0])
    assert rebase(request, delta) is request
    assert isinstance(request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["endTimeUnixNano"], str)


def test_rebase_delta_without_spans_is_zero():
    assert rebase_delta([], T0) == rebase_delta([_request(("a", "", []))], T0) == 0


def _flat(request: dict) -> tuple[str, dict, list[dict]]:
    [rs] = request["resourceSpans"]
    [ss] = rs["scopeSpans"]
    return rs["resource"]["attributes"][0]["value"]["stringValue"], ss["scope"], ss["spans"]


# Out of order across requests, two resources, two scopes of one resource.
A = [_span("a1", 0.0), _span("a2", 0.2), _span("a3", 0.9), _span("a4", 1.0), _span("a5", 1.1)]
B = [_span("b1", 0.5), _span("b2", 2.6)]
C = [_span("c1", 0.7)]
REQUESTS = [_request(("a", "", [A[3], A[0], A[4]]), ("b", "", [B[1]])),
            _request(("b", "", [B[0]]), ("a", "", [A[2], A[1]]), ("a", "lib", C))]


def test_batch_requests_one_request_per_resource_and_scope_per_batch_in_end_time_order():
    out = [_flat(r) for r in batch_requests(copy.deepcopy(REQUESTS), batch_ms=1000, max_spans=256)]
    # A batch covers batch_ms from its first span's end: [0, 1.0), [1.0, 2.0), [2.6, 3.6).
    assert [(service, scope, [s["spanId"] for s in spans]) for service, scope, spans in out] == [
        ("a", {}, ["a1", "a2", "a3"]), ("b", {}, ["b1"]), ("a", {"name": "lib"}, ["c1"]),
        ("a", {}, ["a4", "a5"]),
        ("b", {}, ["b2"]),
    ]


def test_batch_requests_respects_max_spans_and_keeps_the_span_objects():
    requests = copy.deepcopy(REQUESTS)
    originals = {id(s) for r in requests for rs in r["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
    out = [_flat(r) for r in batch_requests(requests, batch_ms=1000, max_spans=2)]
    assert [[s["spanId"] for s in spans] for _, _, spans in out] == [["a1", "a2"], ["a3"], ["b1"], ["c1"], ["a4", "a5"], ["b2"]]
    assert {id(s) for _, _, spans in out for s in spans} == originals


def test_every_span_in_its_own_batch_when_batches_are_short():
    out = [_flat(r) for r in batch_requests(copy.deepcopy(REQUESTS), batch_ms=1, max_spans=256)]
    ends = [int(s["endTimeUnixNano"]) for _, _, spans in out for s in spans]
    assert ends == sorted(ends) and len(out) == len(ends) == 8


def test_collector_batches_are_the_encoded_batch_requests():
    messages = [encode_json(r) for r in REQUESTS]
    out = list(collector_batches(messages, 1000, 2))
    assert all(isinstance(m, bytes) for m in out)
    # Written out by hand (as for max_spans=2 above): one message per resource and scope per batch, each
    # span exactly as it went in.
    spans = {s["spanId"]: s for s in A + B + C}
    assert [_flat(json.loads(m)) for m in out] == [
        ("a", {}, [spans["a1"], spans["a2"]]), ("a", {}, [spans["a3"]]), ("b", {}, [spans["b1"]]),
        ("a", {"name": "lib"}, [spans["c1"]]), ("a", {}, [spans["a4"], spans["a5"]]), ("b", {}, [spans["b2"]]),
    ]


@pytest.mark.parametrize(("messages", "spans", "total", "line"), [
    (3, 10, None, "3 messages, 10 spans"),
    (3, 10, 0, "3 messages, 10 spans"),
    (0, 0, 4, "[----------]   0% 0/4 messages, 0 spans"),
    (2, 1234, 4, "[#####-----]  50% 2/4 messages, 1,234 spans"),
    (5, 9, 4, "[##########] 100% 5/4 messages, 9 spans"),
    (12345, 0, 123456, "[#---------]  10% 12,345/123,456 messages, 0 spans"),
])
def test_render_progress(messages, spans, total, line):
    assert render_progress(messages, spans, total, width=10) == line
