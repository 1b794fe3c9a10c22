import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from connectors.otlp import encode_json, encode_proto, encoder, write_encoding
from reference.otlp import SHARED_DATA, otlp_json_lines

REQUEST = {"resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "gateway"}}]},
    "scopeSpans": [{"scope": {"name": "s"}, "spans": [{
        "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "parentSpanId": "00f067aa0ba902b7",
        "name": "GET /", "kind": 3, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
        "attributes": [{"key": "retries", "value": {"intValue": "2"}}],
        "status": {"code": 2, "message": "boom"}}]}]}]}


def test_proto_carries_the_hex_ids_as_bytes_and_everything_else_as_it_is():
    request = ExportTraceServiceRequest.FromString(encode_proto(REQUEST))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert span.trace_id == bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
    assert span.span_id.hex() == "b7ad6b7169203331" and span.parent_span_id.hex() == "00f067aa0ba902b7"
    assert span.kind == Span.SPAN_KIND_CLIENT and span.status.code == Status.STATUS_CODE_ERROR
    assert span.end_time_unix_nano == 1_700_000_000_500_000_000
    assert span.attributes[0].value.int_value == 2
    assert request.resource_spans[0].resource.attributes[0].value.string_value == "gateway"


def test_every_real_trainticket_message_converts():
    """Every message of the file, every resource, scope and span: ids, kind, times and status as in the JSON."""
    messages = spans = 0
    for line in otlp_json_lines(SHARED_DATA / "2023-01-29_0850_fault_free.otlp.jsonl"):
        message = json.loads(line)
        request = ExportTraceServiceRequest.FromString(encode_proto(message))
        expected = [(rs["resource"]["attributes"][0]["value"]["stringValue"], s["traceId"], s["spanId"],
                     s.get("parentSpanId", ""), s["kind"], int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"]),
                     s.get("status", {}).get("code", 0))
                    for rs in message["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
        got = [(rs.resource.attributes[0].value.string_value, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                s.kind, s.start_time_unix_nano, s.end_time_unix_nano, s.status.code)
               for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        assert got == expected
        messages, spans = messages + 1, spans + len(got)
    # The file's whole content (its README and labels.json: 4890 spans).
    assert spans == 4890 and messages > 20


def test_the_encoding_is_chosen_by_its_collector_name():
    assert encoder("otlp_json") is encode_json and encoder("otlp_proto") is encode_proto
    with pytest.raises(ValueError, match=r"\[pipeline.spans\] encoding = 'protobuf': .*auto.*otlp_json or otlp_proto"):
        encoder("protobuf")


def test_auto_is_read_but_not_written_writers_write_json_then():
    """`auto` makes the span path read each message in the encoding it is in; the tools need one to write."""
    assert write_encoding("auto") == "otlp_json" and encoder("auto") is encode_json
    assert write_encoding("otlp_proto") == "otlp_proto" and write_encoding("otlp_json") == "otlp_json"
    with pytest.raises(ValueError):
        write_encoding("AUTO")
