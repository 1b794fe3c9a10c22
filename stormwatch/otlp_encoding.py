"""The two encodings of an OTLP trace request on Kafka, as the Collector's kafka exporter writes them
(`encoding`): otlp_json and otlp_proto. stormwatch builds requests as OTLP JSON objects; this turns one
into the bytes of either encoding, so `generate`, `replay` and the demo write what the span path reads
([pipeline.spans] encoding). That setting may also be `auto`, which reads both, message by message; it
is no encoding to write in, so writers write otlp_json then.

OTLP JSON is the proto3 JSON mapping except for trace and span ids, which it writes in hex where the
mapping has base64 (OTLP specification, "JSON Protobuf Encoding"); everything else parses as it is.
"""

from __future__ import annotations

import base64

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from stormwatch.config import ConfigError
from stormwatch.traffic.otlp import encode as encode_json

ENCODINGS = ("otlp_json", "otlp_proto")  # the Collector's names; what stormwatch's tools write
SETTINGS = ("auto", *ENCODINGS)  # what [pipeline.spans] encoding may say: auto reads either, per message
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def encode_proto(request: dict) -> bytes:
    """The ExportTraceServiceRequest of an OTLP JSON trace request, serialized."""
    return json_format.ParseDict(_ids_in_base64(request), ExportTraceServiceRequest()).SerializeToString()


def check_setting(setting: str) -> str:
    """`setting` as [pipeline.spans] encoding takes it, or a ConfigError naming what it may be."""
    if setting not in SETTINGS:
        raise ConfigError(f"[pipeline.spans] encoding = {setting!r}: stormwatch reads auto (either encoding, "
                          f"decided per message), {' or '.join(ENCODINGS)}")
    return setting


def write_encoding(setting: str) -> str:
    """The encoding a writer uses for the [pipeline.spans] encoding `setting`: a forced one as it is;
    with auto, otlp_json (readable on the topic; the readers take either)."""
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
