"""Zipkin v2 and Jaeger JSON read as OTLP (connectors/trace_formats.py), as its mapping table says."""

from __future__ import annotations

import json

import pytest

from connectors.trace_formats import detect, hex_id, jaeger_to_otlp, read_requests, zipkin_to_otlp
from reference.otlp import SHARED_DATA

TRACE = "5AF7183FB1D4CF5F"
PADDED_TRACE = "00000000000000005af7183fb1d4cf5f"
T0 = 1_674_982_200_000_000  # µs

ZIPKIN = [
    {"traceId": TRACE, "id": "352bff9a74ca9ad2", "kind": "SERVER", "name": "get /api/orders",
     "timestamp": T0, "duration": 1500, "localEndpoint": {"serviceName": "frontend", "ipv4": "10.0.0.1"},
     "tags": {"http.method": "GET", "http.status_code": "200", "otel.status_code": "OK"}},
    {"traceId": TRACE, "parentId": "352bff9a74ca9ad2", "id": "6b221d5bc9e6496c", "kind": "CLIENT", "name": "get",
     "timestamp": T0 + 100, "duration": 900, "localEndpoint": {"serviceName": "frontend"},
     "remoteEndpoint": {"serviceName": "orders", "ipv4": "10.0.0.2", "port": 8080},
     "tags": {"error": "connection reset", "http.status_code": "502"},
     "annotations": [{"timestamp": T0 + 150, "value": "ws"}, {"timestamp": T0 + 990, "value": "wr"}]},
    {"traceId": TRACE, "parentId": "6B221D5BC9E6496C", "id": "bd7a977555f6b982", "kind": "SERVER",
     "name": "get /orders", "timestamp": T0 + 200, "duration": 600, "localEndpoint": {"serviceName": "orders"},
     "tags": {"otel.status_code": "ERROR", "otel.status_description": "db down",
              "otel.scope.name": "io.opentelemetry.tomcat", "otel.scope.version": "1.32.0"}},
    {"traceId": TRACE, "parentId": "bd7a977555f6b982", "id": "a1", "name": "load orders",
     "timestamp": T0 + 300, "duration": 50, "localEndpoint": {"serviceName": "orders"},
     "tags": {"error": "true", "otel.scope.name": "io.opentelemetry.tomcat", "otel.scope.version": "1.32.0"}},
]

JAEGER_TRACE = "f0e1d2c3b4a59687"
JAEGER = {"data": [{
    "traceID": JAEGER_TRACE,
    "spans": [
        {"traceID": JAEGER_TRACE, "spanID": "1a2b3c4d5e6f7081", "operationName": "HTTP GET /dispatch",
         "references": [], "startTime": T0, "duration": 2000, "processID": "p1",
         "tags": [{"key": "span.kind", "type": "string", "value": "server"},
                  {"key": "http.status_code", "type": "int64", "value": 200},
                  {"key": "sampler.param", "type": "bool", "value": True},
                  {"key": "load", "type": "float64", "value": 0.25}],
         "logs": [{"timestamp": T0 + 10, "fields": [{"key": "event", "type": "string", "value": "Getting customer"},
                                                    {"key": "customer_id", "type": "string", "value": "123"}]}]},
        {"traceID": JAEGER_TRACE, "spanID": "2b", "operationName": "SQL SELECT", "startTime": T0 + 100,
         "duration": 700, "processID": "p2",
         "references": [{"refType": "FOLLOWS_FROM", "traceID": JAEGER_TRACE, "spanID": "99"},
                        {"refType": "CHILD_OF", "traceID": JAEGER_TRACE, "spanID": "1a2b3c4d5e6f7081"}],
         "tags": [{"key": "span.kind", "type": "string", "value": "client"},
                  {"key": "error", "type": "bool", "value": True},
                  {"key": "peer.service", "type": "string", "value": "mysql"}],
         "logs": [{"timestamp": T0 + 700, "fields": [{"key": "message", "type": "string", "value": "retrying"}]}]},
        {"traceID": JAEGER_TRACE, "spanID": "3c", "operationName": "cache lookup", "startTime": T0 + 120,
         "duration": 5, "processID": "p1",
         "references": [{"refType": "FOLLOWS_FROM", "traceID": JAEGER_TRACE, "spanID": "1a2b3c4d5e6f7081"}]},
    ],
    "processes": {
        "p1": {"serviceName": "frontend", "tags": [{"key": "hostname", "type": "string", "value": "node-1"}]},
        "p2": {"serviceName": "customer", "tags": [{"key": "client-uuid", "type": "string", "value": "7f3e"}]},
    },
}]}


def _spans(request: dict) -> dict[str, tuple[dict, dict, dict]]:
    """spanId -> (resource attributes, scope, span)."""
    return {s["spanId"]: (_attrs(rs["resource"]), ss["scope"], s)
            for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}


def _attrs(item: dict) -> dict:
    return {a["key"]: a["value"] for a in item.get("attributes", [])}


def _ns(micros: int) -> str:
    return str(micros * 1000)


def _without_time(event: dict) -> dict:
    return {k: v for k, v in event.items() if k != "timeUnixNano"}


def test_zipkin_ids_kinds_times_and_parents():
    spans = _spans(zipkin_to_otlp(ZIPKIN))
    assert list(spans) == ["352bff9a74ca9ad2", "6b221d5bc9e6496c", "bd7a977555f6b982", "00000000000000a1"]
    assert {s["traceId"] for _, _, s in spans.values()} == {PADDED_TRACE}
    assert [s.get("parentSpanId") for _, _, s in spans.values()] == [
        None, "352bff9a74ca9ad2", "6b221d5bc9e6496c", "bd7a977555f6b982"]
    assert [s["kind"] for _, _, s in spans.values()] == [2, 3, 2, 1]
    assert [s["name"] for _, _, s in spans.values()] == ["get /api/orders", "get", "get /orders", "load orders"]


def test_zipkin_status_from_otel_tags_and_error_tags():
    spans = _spans(zipkin_to_otlp(ZIPKIN))
    assert [s["status"] for _, _, s in spans.values()] == [
        {"code": 1}, {"code": 2, "message": "connection reset"}, {"code": 2, "message": "db down"}, {"code": 2}]


def test_zipkin_attributes_remote_endpoint_events_resources_and_scopes():
    spans = _spans(zipkin_to_otlp(ZIPKIN))
    resource, scope, client = spans["6b221d5bc9e6496c"]
    assert resource == {"service.name": {"stringValue": "frontend"}} and scope == {}
    assert _attrs(client) == {
        "http.status_code": {"stringValue": "502"}, "peer.service": {"stringValue": "orders"},
        "network.peer.address": {"stringValue": "10.0.0.2"}, "network.peer.port": {"intValue": "8080"}}
    assert [e["name"] for e in client["events"]] == ["ws", "wr"]
    resource, scope, server = spans["bd7a977555f6b982"]
    assert resource == {"service.name": {"stringValue": "orders"}}
    assert scope == {"name": "io.opentelemetry.tomcat", "version": "1.32.0"}
    assert "attributes" not in server  # status and scope tags are fields, not attributes
    request = zipkin_to_otlp(ZIPKIN)
    assert [len(rs["scopeSpans"][0]["spans"]) for rs in request["resourceSpans"]] == [2, 2]


def test_jaeger_ids_kinds_times_parents_and_links():
    [request] = jaeger_to_otlp(JAEGER)
    spans = _spans(request)
    root, child, follower = (spans[hex_id(i, 16)][2] for i in ("1a2b3c4d5e6f7081", "2b", "3c"))
    assert {s["traceId"] for _, _, s in spans.values()} == {hex_id(JAEGER_TRACE, 32)} == {"0000000000000000" + JAEGER_TRACE}
    assert "parentSpanId" not in root
    # The CHILD_OF reference is the parent although FOLLOWS_FROM comes first; the other becomes a link.
    assert child["parentSpanId"] == "1a2b3c4d5e6f7081"
    assert child["links"] == [{"traceId": hex_id(JAEGER_TRACE, 32), "spanId": "0000000000000099"}]
    # Without CHILD_OF, the first FOLLOWS_FROM is the parent.
    assert follower["parentSpanId"] == "1a2b3c4d5e6f7081" and "links" not in follower
    assert [s["kind"] for s in (root, child, follower)] == [2, 3, 1]
    assert [s["name"] for s in (root, child, follower)] == ["HTTP GET /dispatch", "SQL SELECT", "cache lookup"]


def test_jaeger_typed_tags_status_logs_and_processes():
    spans = _spans(jaeger_to_otlp(JAEGER)[0])
    resource, _, root = spans["1a2b3c4d5e6f7081"]
    assert resource == {"service.name": {"stringValue": "frontend"}, "hostname": {"stringValue": "node-1"}}
    assert _attrs(root) == {"http.status_code": {"intValue": "200"}, "sampler.param": {"boolValue": True},
                            "load": {"doubleValue": 0.25}}
    assert root["status"] == {}
    assert [_without_time(e) for e in root["events"]] == [
        {"name": "Getting customer", "attributes": [{"key": "customer_id", "value": {"stringValue": "123"}}]}]
    resource, _, child = spans["000000000000002b"]
    assert resource["service.name"] == {"stringValue": "customer"}
    assert child["status"] == {"code": 2}
    assert _attrs(child) == {"peer.service": {"stringValue": "mysql"}}
    assert [_without_time(e) for e in child["events"]] == [
        {"name": "log", "attributes": [{"key": "message", "value": {"stringValue": "retrying"}}]}]


@pytest.mark.parametrize("fmt", ["zipkin", "jaeger"])
def test_microseconds_become_nanoseconds_exactly(fmt):
    """Span and event times: the input's µs times 1000, to the nanosecond (epoch µs are beyond a float's 2^53)."""
    if fmt == "zipkin":
        inputs = {z["id"]: (z["timestamp"], z["duration"], [a["timestamp"] for a in z.get("annotations", [])])
                  for z in ZIPKIN}
        request = zipkin_to_otlp(ZIPKIN)
    else:
        inputs = {j["spanID"]: (j["startTime"], j["duration"], [log["timestamp"] for log in j.get("logs", [])])
                  for j in JAEGER["data"][0]["spans"]}
        [request] = jaeger_to_otlp(JAEGER)
    times = {span_id: (s["startTimeUnixNano"], s["endTimeUnixNano"], [e["timeUnixNano"] for e in s.get("events", [])])
             for span_id, (_, _, s) in _spans(request).items()}
    assert times == {hex_id(span_id, 16): (_ns(start), _ns(start + duration), [_ns(t) for t in events])
                     for span_id, (start, duration, events) in inputs.items()}


def test_ids_are_lower_case_hex_padded_and_anything_else_is_refused():
    assert hex_id("ABC", 16) == "0000000000000abc"
    assert hex_id(None, 16) == hex_id("", 32) == ""
    for bad in ("xyz", "1" * 17):
        with pytest.raises(ValueError, match="hex"):
            hex_id(bad, 16)


OTLP = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": []}]}]}


@pytest.mark.parametrize(("document", "fmt"), [
    (ZIPKIN, "zipkin"), (ZIPKIN[0], "zipkin"), (JAEGER, "jaeger"), (OTLP, "otlp")])
def test_detect(document, fmt):
    assert detect(document) == fmt


def test_detect_refuses_other_json():
    with pytest.raises(ValueError, match="resourceSpans"):
        detect({"spans": []})


def _summary(request: dict) -> list[tuple[str, str, int, str]]:
    """(service.name, spanId, kind, startTimeUnixNano) of each span of a request, in request order."""
    return [(_attrs(rs["resource"])["service.name"]["stringValue"], s["spanId"], s["kind"], s["startTimeUnixNano"])
            for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


# Written out from the documents above, not produced by the converters: one OTLP request per Zipkin
# array or Jaeger document, one per Zipkin span on a line of its own; spans grouped by service.
ZIPKIN_SPANS = [("frontend", "352bff9a74ca9ad2", 2, "1674982200000000000"),
                ("frontend", "6b221d5bc9e6496c", 3, "1674982200000100000"),
                ("orders", "bd7a977555f6b982", 2, "1674982200000200000"),
                ("orders", "00000000000000a1", 1, "1674982200000300000")]
JAEGER_SPANS = [("frontend", "1a2b3c4d5e6f7081", 2, "1674982200000000000"),
                ("frontend", "000000000000003c", 1, "1674982200000120000"),
                ("customer", "000000000000002b", 3, "1674982200000100000")]


@pytest.mark.parametrize(("text", "expected"), [
    (json.dumps(ZIPKIN, indent=2), [ZIPKIN_SPANS]),
    ("\n".join(json.dumps(s) for s in ZIPKIN), [[span] for span in ZIPKIN_SPANS]),
    (json.dumps(JAEGER, indent=2), [JAEGER_SPANS]),
    (json.dumps(JAEGER) + "\n" + json.dumps(JAEGER) + "\n", [JAEGER_SPANS, JAEGER_SPANS]),
], ids=["zipkin-array", "zipkin-span-lines", "jaeger", "jaeger-lines"])
def test_read_requests_detects_the_format_of_a_file(tmp_path, text, expected):
    path = tmp_path / "traces.json"
    path.write_text(text)
    assert [_summary(r) for r in read_requests(path)] == expected
    assert [_summary(r) for r in read_requests(path, "zipkin" if "traceId" in text else "jaeger")] == expected


def test_otlp_lines_pass_through_unchanged(tmp_path):
    lines = [zipkin_to_otlp(ZIPKIN), *jaeger_to_otlp(JAEGER)]
    path = tmp_path / "traces.otlp.jsonl"
    path.write_text("".join(json.dumps(line) + "\n\n" for line in lines))
    assert list(read_requests(path)) == list(read_requests(path, "otlp")) == lines


@pytest.mark.parametrize(("text", "match"), [("not json at all\n{", "not JSON"), ('{"spans": []}', "neither")])
def test_an_unreadable_file_is_a_value_error_naming_it(tmp_path, text, match):
    path = tmp_path / "garbage.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as raised:
        list(read_requests(path))
    assert str(path) in str(raised.value)


def test_a_real_trainticket_file_reads_every_span():
    path = SHARED_DATA / "2023-01-29_0850_fault_free.otlp.jsonl"
    with path.open() as f:
        expected = sum(len(ss["spans"]) for line in f if line.strip()
                       for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"])
    assert expected > 0
    assert sum(len(_spans(r)) for r in read_requests(path)) == expected
