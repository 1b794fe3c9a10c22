"""Retry amplification on hand-made traces: the reference definition (stormwatch/window_aggregates.py)
that the span path's per-trace facts (udfs/traces TraceFacts, its own Java tests) are held equal to on
the shared files (tests/integration/test_span_path_reference.py)."""

from __future__ import annotations

import dataclasses

from reference.otlp import Span
from stormwatch.window_aggregates import CLIENT, SERVER, aggregate, retry_attempts

INTERNAL = 1


def span(span_id: str, parent: str | None, service: str, kind: int, start_ms: float, end_ms: float,
         error: bool = False, name: str | None = None, trace: str = "t") -> Span:
    return Span(trace, span_id, parent, service, None, name or f"op-{span_id}", kind, error,
                int((1_000 + start_ms) * 1e6), int((1_000 + end_ms) * 1e6))


def attempts(*calls: tuple[float, float, bool]) -> list[Span]:
    """A web SERVER span calling api once per (start, end, fails), every attempt named alike."""
    spans = [span("root", None, "web", SERVER, 0, 1_000)]
    for i, (start, end, fails) in enumerate(calls):
        spans += [span(f"c{i}", "root", "web", CLIENT, start, end, fails, name="GET /answer"),
                  span(f"s{i}", f"c{i}", "api", SERVER, start + 1, end - 1, fails)]
    return spans


def edge(spans: list[Span]):
    [window] = aggregate(spans, 3600)
    [e] = [e for e in window.edges if (e.caller, e.callee) == ("web", "api")]
    return e.calls, e.retries


def test_calls_repeated_after_failures_are_retries_of_one_logical_call():
    # The orchestrator retried twice: three attempts, one logical call, amplification 3.
    assert edge(attempts((10, 20, True), (30, 40, True), (50, 60, False))) == (3, 2)


def test_a_hedged_call_started_while_the_first_is_in_flight_is_a_retry():
    assert edge(attempts((10, 200, False), (50, 90, False))) == (2, 1)
    # ...and one started while any earlier attempt is still in flight, not only the previous one.
    assert edge(attempts((10, 200, False), (20, 30, False), (40, 60, False))) == (3, 2)


def test_calls_repeated_after_success_are_more_logical_calls_not_retries():
    assert edge(attempts((10, 20, False), (30, 40, False), (50, 60, False))) == (3, 0)


def resent(spans: list[Span], counts: dict[str, int]) -> list[Span]:
    """The spans with these http.request.resend_count values on the CLIENT spans named."""
    return [dataclasses.replace(s, resend_count=counts[s.span_id]) if s.span_id in counts else s for s in spans]


def test_a_resend_count_of_zero_is_a_first_try_whatever_came_before():
    # A loop over items whose previous item failed: the client says this request is new.
    assert edge(resent(attempts((10, 20, True), (30, 40, False)), {"c0": 0, "c1": 0})) == (2, 0)


def test_a_resend_after_a_success_is_a_redirect_and_after_a_failure_a_retry():
    assert edge(resent(attempts((10, 20, False), (30, 40, False)), {"c1": 1})) == (2, 0)
    assert edge(resent(attempts((10, 20, True), (30, 40, False)), {"c1": 1})) == (2, 1)


def test_a_resend_whose_earlier_attempts_were_not_exported_is_still_a_retry():
    spans = attempts((10, 20, True), (30, 40, False))
    alone = [s for s in spans if s.span_id not in ("c0", "s0")]
    assert edge(resent(alone, {"c1": 2})) == (1, 1)
    assert edge(alone) == (1, 0)


def test_the_resend_count_is_read_from_otlp_json_as_the_span_path_reads_it():
    from reference.otlp import spans_of_request as reference_spans
    from stormwatch.traces import spans_of_request

    def request(*values):
        return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "web"}}]},
                                   "scopeSpans": [{"spans": [
                                       {"traceId": "T", "spanId": f"S{i}", "name": "GET", "kind": 3,
                                        "startTimeUnixNano": "1", "endTimeUnixNano": "2",
                                        "attributes": [{"key": "http.request.resend_count", "value": v}]}
                                       for i, v in enumerate(values)]}]}]}
    values = ({"intValue": "2"}, {"intValue": 1}, {"stringValue": "3"}, {"intValue": "-1"})
    for read in (spans_of_request, reference_spans):
        assert [s.resend_count for s in read(request(*values))] == [2, 1, None, None]


def test_calls_of_another_name_or_parent_or_callee_are_other_calls():
    spans = [span("root", None, "web", SERVER, 0, 1_000),
             span("a", "root", "web", INTERNAL, 0, 500), span("b", "root", "web", INTERNAL, 500, 1_000),
             # Same name, failing, but under different parent spans: two logical calls.
             span("c1", "a", "web", CLIENT, 10, 20, True, name="GET /answer"), span("s1", "c1", "api", SERVER, 11, 19, True),
             span("c2", "b", "web", CLIENT, 510, 520, name="GET /answer"), span("s2", "c2", "api", SERVER, 511, 519),
             # Same parent, after a failure, but another operation: another call.
             span("c3", "a", "web", CLIENT, 30, 40, name="GET /other"), span("s3", "c3", "api", SERVER, 31, 39)]
    assert edge(spans) == (3, 0)


def test_a_hop_without_a_client_span_takes_the_callees_span_as_the_attempt():
    # A proxy that is not traced: web's SERVER span is the parent of api's SERVER spans directly.
    spans = [span("root", None, "web", SERVER, 0, 1_000),
             span("s1", "root", "api", SERVER, 10, 20, True, name="POST /q"),
             span("s2", "root", "api", SERVER, 30, 40, name="POST /q")]
    assert edge(spans) == (2, 1)
    assert retry_attempts([(spans[0], spans[1]), (spans[0], spans[2])]) == {("t", "s2", "api")}


def test_retries_split_over_windows_count_where_their_trace_falls():
    # Two traces, one retried: the window's edge has 3 calls, 1 retry (amplification 1.5).
    one = attempts((10, 20, True), (30, 40, False))
    other = [Span("u", s.span_id, s.parent_span_id, s.service_name, None, s.name, s.kind, s.error,
                  s.start, s.end) for s in attempts((10, 20, False))]
    assert edge(one + other) == (3, 1)
