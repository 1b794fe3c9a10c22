"""The span path's topology (job `spans`) through the real Kafka and Flink: real TrainTicket traces and
hand-made ones in, per-window edges, error classes and breaks out, checked against an independent
per-trace reading."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from reference.otlp import SHARED_DATA, otlp_json_lines, spans_of_request
from stormwatch.replay import collector_batches, produce
from tests.conftest import SPAN_PATH_ROLES, live_job, read_topic, stormwatch
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

EXCEPTION_FAULT = SHARED_DATA / "2023-01-29_1004.otlp.jsonl"  # has spans exported twice
ROLES = SPAN_PATH_ROLES
# Hand-made traces start a minute or more after the real data ends, on a minute: in their own windows, yet in
# order; all they yield (some are placed up to 25 s after their end: see _trace_times) in the windows from T0.
T0 = -(-(max(s.end for line in otlp_json_lines(EXCEPTION_FAULT) for s in spans_of_request(json.loads(line)))
         + 60 * 10**9) // (60 * 10**9)) * 60 * 10**9


def _span(trace, span, parent, name, kind, start_ms, end_ms, error=False, links=(), **attributes):
    s = {"traceId": trace, "spanId": span, "name": name, "kind": kind,
         "startTimeUnixNano": str(T0 + start_ms * 1_000_000), "endTimeUnixNano": str(T0 + end_ms * 1_000_000),
         "attributes": [{"key": k.replace("_", "."), "value": {"stringValue": v}} for k, v in attributes.items()]}
    if parent:
        s["parentSpanId"] = parent
    if error:
        s["status"] = {"code": 2, "message": "boom"}
    if links:
        s["links"] = [{"traceId": t, "spanId": i} for t, i in links]
    return s


def _message(service, *spans):
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}).encode()


T = "%032x"
HAND_MADE = [
    # user -> web (SERVER) -> web CLIENT -> api SERVER, the api fails and web catches it.
    _message("web", _span(T % 1, "%016x" % 1, None, "GET /", 2, 0, 100),
             _span(T % 1, "%016x" % 2, "%016x" % 1, "call api", 3, 10, 90, error=True)),
    _message("api", _span(T % 1, "%016x" % 3, "%016x" % 2, "GET /api", 2, 12, 88, error=True),
             _span(T % 1, "%016x" % 4, "%016x" % 3, "validate", 1, 20, 30, error=True)),
    # web calls things nobody traces: a database by db.system, an LLM API by peer.service.
    _message("web", _span(T % 2, "%016x" % 5, None, "POST /chat", 2, 0, 500),
             _span(T % 2, "%016x" % 6, "%016x" % 5, "SELECT", 3, 10, 20, db_system="postgresql"),
             _span(T % 2, "%016x" % 7, "%016x" % 5, "chat", 3, 30, 400, peer_service="llm-api",
                   server_address="api.llm.example")),
    # api -> web server-to-server (no CLIENT span in between): still an edge.
    _message("api", _span(T % 3, "%016x" % 8, None, "job", 2, 0, 50)),
    _message("web", _span(T % 3, "%016x" % 9, "%016x" % 8, "hook", 2, 5, 40)),
    # A broken trace: the parent never arrives. A span that names itself as its parent.
    _message("api", _span(T % 4, "%016x" % 10, "%016x" % 99, "orphan", 2, 0, 10),
             _span(T % 5, "%016x" % 11, "%016x" % 11, "self", 2, 0, 10)),
    # A cycle of parent links: neither span is a root, each names the other.
    _message("web", _span(T % 6, "%016x" % 12, "%016x" % 13, "a", 2, 0, 10)),
    _message("api", _span(T % 6, "%016x" % 13, "%016x" % 12, "b", 2, 0, 10)),
    # The same span exported twice.
    _message("api", _span(T % 7, "%016x" % 14, None, "dup", 2, 0, 10)),
    _message("api", _span(T % 7, "%016x" % 14, None, "dup", 2, 0, 10)),
    # Messaging: web and api publish (PRODUCER), billing consumes both messages in one batch, a root of
    # its own trace (CONSUMER) linking to them (one link in upper case, one to a span never sent):
    # edges web -> billing and api -> billing through the links, none from `user`; the failed publish
    # is the caller's error.
    _message("web", _span(T % 8, "%016x" % 15, None, "publish", 4, 0, 5)),
    # A SERVER root with a link (to an earlier request, say) is still called by `user`.
    _message("api", _span(T % 12, "%016x" % 20, None, "resume", 2, 0, 5, links=[(T % 8, "%016x" % 15)])),
    _message("api", _span(T % 9, "%016x" % 16, None, "publish", 4, 0, 6, error=True)),
    _message("billing", _span(T % 10, "%016x" % 17, None, "process", 5, 2000, 2100,
                              links=[(T % 8, "%016x" % 15), ((T % 9).upper(), ("%016x" % 16).upper()),
                                     (T % 98, "%016x" % 98)])),
    # A single message whose context travelled as the parent and as a link too: one call, not two.
    _message("web", _span(T % 11, "%016x" % 18, None, "publish", 4, 0, 5)),
    _message("billing", _span(T % 11, "%016x" % 19, "%016x" % 18, "process", 5, 1000, 1010,
                              links=[(T % 11, "%016x" % 18)])),
]


def _unique(spans):
    return list({(s.trace_id, s.span_id): s for s in spans}.values())


def _windows(end_ns: int, size_ms: int, slide_ms: int) -> list[int]:
    t = end_ns // 1_000_000  # event time is the end, in milliseconds
    last = t - t % slide_ms
    return [s for s in range(last - size_ms + slide_ms, last + 1, slide_ms) if s <= t < s + size_ms]


def _trace_times(spans, topology) -> dict[str, int]:
    """Trace id -> where all it yields is windowed (ns): its end, the latest end of its spans and of the
    CONSUMER spans linking to it (their links make calls of its PRODUCER spans), unless the span path holds
    it longer than its end's quiet time: then when it lets it go, less the quiet time. It lets a trace go
    quiet after that end once its root span came, root-wait after it while it has none, follow-delay
    after its last PRODUCER span (for the consumers linking to it), and max-hold after its first end."""
    quiet, root_wait, follow, max_hold = (int(float(topology[k]) * 1000) for k in (
        "trace_quiet_seconds", "trace_root_wait_seconds", "max_follow_delay_seconds", "trace_max_hold_seconds"))
    first, last, producer, rooted = {}, {}, {}, set()
    for s in spans:
        end = s.end // 1_000_000
        for trace in [s.trace_id, *(link[0] for link in (s.links if s.kind == 5 else ()))]:
            first[trace], last[trace] = min(first.get(trace, end), end), max(last.get(trace, end), end)
        if s.parent_span_id is None:
            rooted.add(s.trace_id)
        if s.kind == 4:
            producer[s.trace_id] = max(producer.get(s.trace_id, end), end)
    times = {}
    for trace, end in last.items():
        done = max(end + (quiet if trace in rooted else root_wait), producer.get(trace, end - follow) + follow)
        times[trace] = max(end, min(done, first[trace] + max_hold) - quiet) * 1_000_000
    return times


def _reference_edges(spans, size_ms, slide_ms, topology) -> Counter:
    """(window start, caller, callee) -> calls, counted from the raw spans, one trace at a time, in the
    windows of the trace's time."""
    ends = _trace_times(spans, topology)
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    has_child = {(s.trace_id, s.parent_span_id) for s in spans if s.parent_span_id}
    calls = Counter()
    for s in spans:
        edge = None
        parent = by_id.get((s.trace_id, s.parent_span_id)) if s.parent_span_id != s.span_id else None
        if s.parent_span_id is None and not (s.kind == 5 and s.links):
            edge = ("user", s.service_name)
        elif parent is not None and parent.service_name != s.service_name:
            edge = (parent.service_name, s.service_name)
        if edge:
            for w in _windows(ends[s.trace_id], size_ms, slide_ms):
                calls[(w, *edge)] += 1
        for link in s.links if s.kind == 5 else ():
            producer = by_id.get(link)
            if (producer is not None and producer.kind == 4 and producer.service_name != s.service_name
                    and link != (s.trace_id, s.parent_span_id)):
                for w in _windows(ends[producer.trace_id], size_ms, slide_ms):
                    calls[(w, producer.service_name, s.service_name)] += 1
        if s.kind == 3 and (s.trace_id, s.span_id) not in has_child:
            callee = s.untraced_callee
            for w in _windows(ends[s.trace_id], size_ms, slide_ms):
                calls[(w, s.service_name, callee)] += 1
    return calls


def _reference_services(spans, size_ms, slide_ms, topology) -> tuple[dict, Counter]:
    """Per (window start, service): span counts and error classes; per (window, absorbing service,
    failing service): breaks. Each error span is classified from its own trace, in the windows of its time."""
    ends = _trace_times(spans, topology)
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    failing_children = {(s.trace_id, s.parent_span_id) for s in spans
                        if s.error and s.parent_span_id and s.parent_span_id != s.span_id}
    services: dict = {}
    breaks = Counter()
    for s in spans:
        parent = by_id.get((s.trace_id, s.parent_span_id)) if s.parent_span_id != s.span_id else None
        facts = Counter(spans=1, server_spans=int(s.kind == 2),
                        orphans=int(s.parent_span_id is not None and s.parent_span_id != s.span_id and parent is None),
                        self_parents=int(s.parent_span_id == s.span_id))
        if s.error:
            facts.update(errors=1, error_origins=int((s.trace_id, s.span_id) not in failing_children),
                         errors_propagated=int(parent is not None and parent.error),
                         errors_absorbed=int(parent is not None and not parent.error),
                         errors_surfaced=int(s.parent_span_id is None))
        for w in _windows(ends[s.trace_id], size_ms, slide_ms):
            services.setdefault((w, s.service_name), Counter()).update(facts)
            if s.error and parent is not None and not parent.error:
                breaks[(w, parent.service_name, s.service_name)] += 1
    return services, breaks


def test_edges_errors_and_breaks_match_an_independent_reading(config, topics_for):
    names = topics_for(ROLES)
    real = list(collector_batches(otlp_json_lines(EXCEPTION_FAULT)))
    # One partition: a replay at full speed keeps event-time order only there (see the test config).
    produce(config, names["source"], real + HAND_MADE, partition=0)
    args = ["--bounded", *[f"--topic={role}={name}" for role, name in names.items()]]
    result = stormwatch("run", "spans", "--", "--group-id", f"spans-{names['source']}", *args)
    assert result.returncode == 0, result.stderr[-3000:]

    topology = config.section("pipeline", "topology")
    size_ms, slide_ms = topology["window_size_seconds"] * 1000, topology["window_slide_seconds"] * 1000
    tumbling_ms = topology["edge_tumbling_window_seconds"] * 1000
    spans = _unique(s for m in real + HAND_MADE for s in spans_of_request(json.loads(m)))
    expected = {"sliding": _reference_edges(spans, size_ms, slide_ms, topology),
                "tumbling": _reference_edges(spans, tumbling_ms, tumbling_ms, topology)}

    all_edges = read_topic(config, names["edges"], sum(map(len, expected.values())))
    assert_valid("stormwatch_edges", all_edges)
    got = {"sliding": Counter(), "tumbling": Counter()}
    for e in all_edges:
        assert e["window_end_ms"] - e["window_start_ms"] == (size_ms if e["window_kind"] == "sliding" else tumbling_ms)
        got[e["window_kind"]][(e["window_start_ms"], e["caller"], e["callee"])] += e["calls"]
    assert got == expected, {kind: (got[kind] - expected[kind], expected[kind] - got[kind]) for kind in got}
    # Tumbling windows count each call once: their totals are the calls of the whole input.
    assert sum(got["tumbling"].values()) == sum(_reference_edges(spans, 10**15, 10**15, topology).values())
    edges = [e for e in all_edges if e["window_kind"] == "sliding"]

    hand = [e for e in edges if e["window_start_ms"] == T0 // 1_000_000]
    pairs = {(e["caller"], e["callee"], e["callee_virtual"]) for e in hand}
    assert pairs == {("user", "web", False), ("web", "api", False), ("web", "postgresql", True),
                     ("web", "llm-api", True), ("user", "api", False), ("api", "web", False),
                     ("web", "billing", False), ("api", "billing", False)}
    messaging = {(e["caller"], e["window_kind"]): e for e in all_edges if e["callee"] == "billing"
                 and e["window_start_ms"] == T0 // 1_000_000}
    web, api = messaging[("web", "sliding")], messaging[("api", "sliding")]
    assert (web["calls"], web["client_errors"], api["calls"], api["client_errors"]) == (2, 0, 1, 1)
    # The CLIENT - SERVER gap is an RPC's: a message has none.
    assert web["gap_ms_total"] == api["gap_ms_total"] == 0.0

    expected_services, expected_breaks = _reference_services(spans, size_ms, slide_ms, topology)
    rows = read_topic(config, names["service_windows"], len(expected_services))
    assert_valid("stormwatch_service_windows", rows)
    fields = ("spans", "server_spans", "errors", "error_origins", "errors_propagated", "errors_absorbed",
              "errors_surfaced", "orphans", "self_parents")
    got_services = {(r["window_start_ms"], r["service"]): Counter({f: r[f] for f in fields if r[f]}) for r in rows}
    assert len(rows) == len(got_services), "one record per service and window"
    assert got_services == {k: +v for k, v in expected_services.items()}

    breaks = read_topic(config, names["error_breaks"], len(expected_breaks))
    assert_valid("stormwatch_error_breaks", breaks)
    assert Counter({(b["window_start_ms"], b["absorbing_service"], b["failing_service"]): b["breaks"]
                    for b in breaks}) == expected_breaks
    # The hand-made chain: api's failing `validate` propagates to GET /api, which propagates to web's
    # CLIENT span; web's SERVER span catches it there. api's failed publish is an origin of its own.
    hand = {r["service"]: r for r in rows if r["window_start_ms"] == T0 // 1_000_000}
    assert (hand["api"]["errors"], hand["api"]["error_origins"], hand["api"]["errors_propagated"]) == (3, 2, 2)
    assert (hand["web"]["errors"], hand["web"]["errors_absorbed"]) == (1, 1)
    assert hand["api"]["orphans"] == 1 and hand["api"]["self_parents"] == 1

    stages = read_topic(config, names["latency_stages"], 1, timeout=30)
    assert_valid("stormwatch_latency_stages", stages)
    hand_stages = {(r["service"], r["operation"]): r for r in stages
                   if r["window_start_ms"] == T0 // 1_000_000 and r["example_trace_id"] == T % 1}
    # GET / (100 ms) waits 80 ms on its CLIENT call; the call waits 76 ms on GET /api, which waits
    # 10 ms on validate: what is left is each stage's own time.
    self_ms = {k: round(r["self_mean_ms"], 3) for k, r in hand_stages.items()}
    assert self_ms == {("web", "GET /"): 20.0, ("web", "call api"): 4.0, ("api", "GET /api"): 66.0,
                       ("api", "validate"): 10.0}
    per_window = Counter()
    ends = _trace_times(spans, topology)
    for s in spans:
        for w in _windows(ends[s.trace_id], size_ms, slide_ms):
            per_window[(w, s.service_name, s.name)] += 1
    assert Counter({(r["window_start_ms"], r["service"], r["operation"]): r["spans"] for r in stages}) == per_window
    assert all(0 <= r["self_mean_ms"] <= r["duration_mean_ms"] + 1e-9 for r in stages)


def _late_test_message(trace: int, end_ms: int) -> tuple[str, bytes]:
    """One web SERVER span ending at `end_ms`, as an OTLP JSON message; (its trace id, the message)."""
    trace_id = T % (10**6 + trace)
    span = {"traceId": trace_id, "spanId": "%016x" % (trace + 1), "name": "GET /", "kind": 2,
            "startTimeUnixNano": str((end_ms - 5) * 10**6), "endTimeUnixNano": str(end_ms * 10**6)}
    return trace_id, json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "web"}}]},
        "scopeSpans": [{"spans": [span]}]}]}).encode()


def test_late_spans_go_to_the_dead_letters_not_silently_into_closed_windows(config, topics_for):
    from connectors.kafka import producer

    names = topics_for(SPAN_PATH_ROLES)
    client = producer(config)
    try:
        with live_job("spans", names, "--group-id", f"late-{names['source']}"):
            t1 = 1_700_000_000_000  # the past: spans ahead of the clock are refused
            # Ten minutes of spans, a trace every 10 s: the watermark moves well past their start.
            for i in range(60):
                client.send(names["source"], value=_late_test_message(i, t1 + i * 10_000)[1])
            client.flush()
            assert read_topic(config, names["edges"], 1, timeout=300), "windows closed"
            late_trace, late_value = _late_test_message(999, t1)
            client.send(names["source"], value=late_value)
            client.flush()
            dead = read_topic(config, names["dead_letters"], 1, timeout=60)
    finally:
        client.close()
    assert_valid("stormwatch_dead_letters", dead)
    assert len(dead) == 1 and dead[0]["reason"].startswith("late span: ended ")
    assert json.loads(dead[0]["payload"])["traceId"] == late_trace
    assert dead[0]["source_topic"] == names["source"] and dead[0]["job"] == "spans"
