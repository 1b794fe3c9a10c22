"""OTLP on Kafka, the Python side: the pieces of OTLP JSON (attributes, resources) and the two encodings
of a request as the Collector's kafka exporter writes them (`encoding`): otlp_json and otlp_proto.
stormwatch builds requests as OTLP JSON objects (the traffic generator, replay, trace files); this turns
one into the bytes of either encoding, so `generate`, `replay` and the demo write what the jobs read
([pipeline.spans] encoding). The JVM side, the `otlp` format that decodes them, is in connectors/java/.

OTLP JSON is the proto3 JSON mapping except for trace and span ids, which it writes in hex where the
mapping has base64 (OTLP specification, "JSON Protobuf Encoding"); everything else parses as it is.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ENCODINGS = ("otlp_json", "otlp_proto")  # the Collector's names; what stormwatch's tools write
SETTINGS = ("auto", *ENCODINGS)  # what [pipeline.spans] encoding may say: auto reads either, per message
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")

# Attribute values stormwatch writes; OTLP/JSON writes an int64 as a string.
AttributeValue = str | int


def attributes_json(attributes: Iterable[tuple[str, AttributeValue]]) -> list[dict]:
    """OTLP/JSON KeyValues; int64 values are JSON strings (the proto3 JSON mapping)."""
    return [
        {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}}
        for key, value in attributes
    ]


def resource_json(service: str, instance: str) -> dict:
    return {"attributes": attributes_json([("service.name", service), ("service.instance.id", instance)])}


def span_json(trace_id: str, span_id: str, parent: str, name: str, kind: int, start: int, end: int,
              attributes: list[dict], events: list[dict], links: list[dict], status: dict) -> dict:
    """One OTLP/JSON span as the Collector writes it: empty fields left out (a root has no parentSpanId,
    a span without attributes, events or links none of those), times as strings, `status` as given."""
    out = {"traceId": trace_id, "spanId": span_id}
    if parent:
        out["parentSpanId"] = parent
    out |= {"name": name, "kind": kind, "startTimeUnixNano": str(start), "endTimeUnixNano": str(end)}
    if attributes:
        out["attributes"] = attributes
    if events:
        out["events"] = events
    if links:
        out["links"] = links
    out["status"] = status
    return out


def encode_json(message: dict) -> bytes:
    """One Kafka message value: compact JSON, as the Collector's otlp_json encoding writes it."""
    return json.dumps(message, separators=(",", ":")).encode()


def encode_proto(request: dict) -> bytes:
    """The ExportTraceServiceRequest of an OTLP JSON trace request, serialized."""
    return json_format.ParseDict(_ids_in_base64(request), ExportTraceServiceRequest()).SerializeToString()


def check_setting(setting: str) -> str:
    """`setting` as [pipeline.spans] encoding takes it, or a ValueError naming what it may be."""
    if setting not in SETTINGS:
        raise ValueError(f"[pipeline.spans] encoding = {setting!r}: stormwatch reads auto (either encoding, "
                         f"decided per message), {' or '.join(ENCODINGS)}")
    return setting


def write_encoding(setting: str) -> str:
    """The encoding a writer uses for the [pipeline.spans] encoding `setting`: a forced one as it is;
    with auto (no encoding to write in), otlp_json: readable on the topic, and the readers take either."""
    return "otlp_json" if check_setting(setting) == "auto" else setting


def encoder(setting: str):
    """The function giving a trace request's Kafka message value for [pipeline.spans] encoding `setting`."""
    return encode_proto if write_encoding(setting) == "otlp_proto" else encode_json


def _ids_in_base64(value):
    if isinstance(value, dict):
        return {k: _base64_of_hex(v) if k in _ID_FIELDS and isinstance(v, str) else _ids_in_base64(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_ids_in_base64(v) for v in value]
    return value


def _base64_of_hex(text: str) -> str:
    return base64.b64encode(bytes.fromhex(text)).decode()
