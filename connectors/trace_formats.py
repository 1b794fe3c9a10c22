"""Trace files in other formats, read as OTLP/JSON ExportTraceServiceRequests.

- OTLP JSON: one ExportTraceServiceRequest a line (what the Collector's kafka exporter writes), or a
  single one spread over several lines.
- Zipkin v2 JSON: a JSON array of spans (the /api/v2/spans body, a /api/v2/trace answer), or one array
  or one span a line.
- Jaeger JSON: `{"data": [{"traceID", "spans": [...], "processes": {...}}]}`, the query API's answer
  and the UI's "Download JSON" export (one document, or one a line).

Mapping to OTLP, as the OpenTelemetry Collector's Zipkin and Jaeger receivers do it:

| OTLP                   | Zipkin v2                                  | Jaeger                                          |
|------------------------|--------------------------------------------|-------------------------------------------------|
| traceId, spanId        | traceId, id (hex, left-padded with zeros to 32 / 16 digits, lower case)      ||
| parentSpanId           | parentId                                   | the first CHILD_OF reference in the same trace (else the first FOLLOWS_FROM); the others become links |
| name                   | name                                       | operationName                                   |
| kind                   | kind: SERVER 2, CLIENT 3, PRODUCER 4, CONSUMER 5; none: INTERNAL 1 | tag span.kind (server, client, producer, consumer, internal); none: INTERNAL 1 |
| start/endTimeUnixNano  | timestamp, timestamp + duration (µs -> ns)  | startTime, startTime + duration (µs -> ns)      |
| status                 | tags otel.status_code / otel.status_description; tag `error` -> ERROR with its value as message | the same tags; tag `error` true -> ERROR |
| scope                  | tags otel.scope.name / otel.scope.version (otel.library.* of older SDKs)    ||
| attributes             | the other tags (strings); remoteEndpoint: peer.service, network.peer.address, network.peer.port | the other tags, typed (string, bool, int64, float64, binary) |
| events                 | annotations: name = value                  | logs: name = field `event` (else "log"), the other fields attributes |
| resource               | service.name = localEndpoint.serviceName   | service.name = the process's serviceName, its tags as attributes |

A Zipkin span `shared` with its client (the same id on both sides, B3's old single-span RPCs) keeps
its id: OTLP then has two spans with one id, which flatten_spans passes on as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from connectors.otlp import span_json

Format = Literal["otlp", "zipkin", "jaeger"]
FORMATS = ("otlp", "zipkin", "jaeger")

SPAN_KIND_INTERNAL, SPAN_KIND_SERVER, SPAN_KIND_CLIENT, SPAN_KIND_PRODUCER, SPAN_KIND_CONSUMER = 1, 2, 3, 4, 5
KINDS = {"SERVER": SPAN_KIND_SERVER, "CLIENT": SPAN_KIND_CLIENT, "PRODUCER": SPAN_KIND_PRODUCER,
         "CONSUMER": SPAN_KIND_CONSUMER, "INTERNAL": SPAN_KIND_INTERNAL}
STATUS_CODE_OK, STATUS_CODE_ERROR = 1, 2
# Tags that carry OTLP fields, not attributes.
_STATUS_CODE_TAGS = ("otel.status_code",)
_STATUS_MESSAGE_TAGS = ("otel.status_description",)
_SCOPE_NAME_TAGS = ("otel.scope.name", "otel.library.name")
_SCOPE_VERSION_TAGS = ("otel.scope.version", "otel.library.version")
_FIELD_TAGS = {*_STATUS_CODE_TAGS, *_STATUS_MESSAGE_TAGS, *_SCOPE_NAME_TAGS, *_SCOPE_VERSION_TAGS, "error", "span.kind"}


def hex_id(value: str | None, digits: int) -> str:
    """A Zipkin / Jaeger id as OTLP/JSON writes it: lower-case hex, left-padded to `digits`."""
    text = (value or "").strip().lower()
    if not text:
        return ""
    if len(text) > digits or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"not an id of at most {digits} hex digits: {value!r}")
    return text.rjust(digits, "0")


def _micros_to_nanos(micros: int | float) -> int:
    # Exact for whole microseconds: epoch ns (~1.7e18) is beyond what a float holds to the unit.
    if isinstance(micros, int):
        return micros * 1000
    whole = int(micros)
    return whole * 1000 + round((micros - whole) * 1000)


def _value(value) -> dict:
    """An OTLP AnyValue of a JSON value."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(pairs) -> list[dict]:
    return [{"key": key, "value": value} for key, value in pairs]


def _first(tags: dict, names: tuple[str, ...]):
    return next((tags[n] for n in names if n in tags), None)


def _status(tags: dict) -> dict:
    """OTLP status from the OTel status tags, or from the `error` tag of older instrumentation."""
    code = str(_first(tags, _STATUS_CODE_TAGS) or "").upper()
    message = str(_first(tags, _STATUS_MESSAGE_TAGS) or "")
    error = tags.get("error")
    if code == "ERROR" or (not code and error not in (None, False, "false")):
        if not message and isinstance(error, str) and error not in ("", "true"):
            message = error
        return {"code": STATUS_CODE_ERROR, "message": message} if message else {"code": STATUS_CODE_ERROR}
    return {"code": STATUS_CODE_OK} if code == "OK" else {}


def _scope(tags: dict) -> dict:
    out = {}
    if (name := _first(tags, _SCOPE_NAME_TAGS)) is not None:
        out["name"] = str(name)
    if (version := _first(tags, _SCOPE_VERSION_TAGS)) is not None:
        out["version"] = str(version)
    return out


def _request(grouped: dict[tuple[str, str], tuple[dict, dict, list[dict]]]) -> dict:
    """One ExportTraceServiceRequest of (resource key, scope key) -> (resource, scope, spans)."""
    by_resource: dict[str, tuple[dict, list[dict]]] = {}
    for (resource_key, _), (resource, scope, spans) in grouped.items():
        scope_spans = by_resource.setdefault(resource_key, (resource, []))[1]
        scope_spans.append({"scope": scope, "spans": spans})
    return {"resourceSpans": [{"resource": resource, "scopeSpans": scope_spans}
                              for resource, scope_spans in by_resource.values()]}


def _add(grouped, resource: dict, scope: dict, span: dict) -> None:
    key = (json.dumps(resource, sort_keys=True), json.dumps(scope, sort_keys=True))
    grouped.setdefault(key, (resource, scope, []))[2].append(span)


# ---------------------------------------------------------------------------------------------------
# Zipkin v2


def zipkin_to_otlp(spans: list[dict]) -> dict:
    """An ExportTraceServiceRequest of Zipkin v2 spans, grouped by service and scope."""
    grouped: dict = {}
    for z in spans:
        tags = {str(k): v for k, v in (z.get("tags") or {}).items()}
        attributes = [(k, _value(v)) for k, v in tags.items() if k not in _FIELD_TAGS]
        remote = z.get("remoteEndpoint") or {}
        if remote.get("serviceName"):
            attributes.append(("peer.service", {"stringValue": remote["serviceName"]}))
        if address := remote.get("ipv4") or remote.get("ipv6"):
            attributes.append(("network.peer.address", {"stringValue": address}))
        if remote.get("port"):
            attributes.append(("network.peer.port", {"intValue": str(remote["port"])}))
        start = _micros_to_nanos(z.get("timestamp", 0))
        events = [{"timeUnixNano": str(_micros_to_nanos(a["timestamp"])), "name": str(a.get("value", ""))}
                  for a in z.get("annotations") or []]
        kind = KINDS.get(str(z.get("kind") or "").upper(), SPAN_KIND_INTERNAL)
        trace_id = hex_id(z["traceId"], 32)
        span = span_json(trace_id, hex_id(z["id"], 16), hex_id(z.get("parentId"), 16), z.get("name") or "", kind,
                         start, start + _micros_to_nanos(z.get("duration", 0)), _attributes(attributes), events, [],
                         _status(tags))
        service = (z.get("localEndpoint") or {}).get("serviceName")
        resource = {"attributes": _attributes([("service.name", {"stringValue": service})])} if service else {}
        _add(grouped, resource, _scope(tags), span)
    return _request(grouped)


# ---------------------------------------------------------------------------------------------------
# Jaeger


def _jaeger_value(tag: dict) -> dict:
    kind, value = str(tag.get("type", "string")).lower(), tag.get("value")
    if kind == "bool":
        return {"boolValue": value if isinstance(value, bool) else str(value).lower() == "true"}
    if kind == "int64":
        return {"intValue": str(int(value))}
    if kind == "float64":
        return {"doubleValue": float(value)}
    if kind == "binary":
        return {"bytesValue": value}  # base64 in both formats
    return {"stringValue": str(value)}


def _jaeger_tags(tags: list[dict] | None) -> dict[str, dict]:
    """Tag key -> the tag."""
    return {t["key"]: t for t in tags or []}


def _plain(tag: dict):
    """The tag's value as a JSON value of its type."""
    return next(iter(_jaeger_value(tag).values()))


def jaeger_to_otlp(document: dict) -> list[dict]:
    """An ExportTraceServiceRequest per trace of a Jaeger JSON document."""
    out = []
    for trace in document.get("data") or []:
        processes = trace.get("processes") or {}
        grouped: dict = {}
        for j in trace.get("spans") or []:
            trace_id = hex_id(j.get("traceID") or trace.get("traceID"), 32)
            tags = _jaeger_tags(j.get("tags"))
            plain = {key: _plain(tag) for key, tag in tags.items() if key in _FIELD_TAGS}
            parent, chosen = hex_id(j.get("parentSpanID"), 16), None
            references = j.get("references") or []
            if not parent:
                same_trace = [r for r in references if hex_id(r.get("traceID"), 32) == trace_id]
                chosen = next((r for r in same_trace if r.get("refType") == "CHILD_OF"), None) or next(
                    (r for r in same_trace if r.get("refType") == "FOLLOWS_FROM"), None)
                parent = hex_id(chosen["spanID"], 16) if chosen else ""
            links = [{"traceId": hex_id(r.get("traceID"), 32), "spanId": hex_id(r.get("spanID"), 16)}
                     for r in references
                     if r is not chosen and (hex_id(r.get("traceID"), 32), hex_id(r.get("spanID"), 16)) != (trace_id, parent)]
            events = []
            for log in j.get("logs") or []:
                fields = _jaeger_tags(log.get("fields"))
                name = str(_plain(fields.pop("event"))) if "event" in fields else "log"
                event = {"timeUnixNano": str(_micros_to_nanos(log["timestamp"])), "name": name}
                if fields:
                    event["attributes"] = _attributes((k, _jaeger_value(t)) for k, t in fields.items())
                events.append(event)
            start = _micros_to_nanos(j.get("startTime", 0))
            kind = KINDS.get(str(plain.get("span.kind") or "").upper(), SPAN_KIND_INTERNAL)
            span = span_json(trace_id, hex_id(j["spanID"], 16), parent, j.get("operationName") or "", kind, start,
                             start + _micros_to_nanos(j.get("duration", 0)),
                             _attributes((k, _jaeger_value(t)) for k, t in tags.items() if k not in _FIELD_TAGS),
                             events, links, _status(plain))
            process = j.get("process") or processes.get(j.get("processID"), {})
            resource_attributes = [("service.name", {"stringValue": process["serviceName"]})] if process.get(
                "serviceName") else []
            resource_attributes += [(t["key"], _jaeger_value(t)) for t in process.get("tags") or []]
            resource = {"attributes": _attributes(resource_attributes)} if resource_attributes else {}
            _add(grouped, resource, _scope(plain), span)
        if grouped:
            out.append(_request(grouped))
    return out


# ---------------------------------------------------------------------------------------------------
# Files


def _documents(text: str) -> list:
    """The JSON values of a file: one document, or one a line."""
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def detect(document) -> Format:
    """The format of one JSON value of a trace file."""
    if isinstance(document, list) or (isinstance(document, dict) and "traceId" in document and "id" in document):
        return "zipkin"
    if isinstance(document, dict) and "resourceSpans" in document:
        return "otlp"
    if isinstance(document, dict) and "data" in document:
        return "jaeger"
    raise ValueError("neither OTLP JSON (resourceSpans), Zipkin v2 (span arrays) nor Jaeger JSON (data)")


def read_requests(path: Path, fmt: Format | Literal["auto"] = "auto") -> Iterator[dict]:
    """The file's traces as OTLP ExportTraceServiceRequests (OTLP files: their own, unchanged)."""
    try:
        documents = _documents(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not JSON, nor JSON lines: {e}") from None
    for document in documents:
        try:
            kind = detect(document) if fmt == "auto" else fmt
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        if kind == "otlp":
            yield document
        elif kind == "zipkin":
            yield zipkin_to_otlp(document if isinstance(document, list) else [document])
        elif kind == "jaeger":
            yield from jaeger_to_otlp(document)
        else:
            raise ValueError(f"unknown trace format {fmt!r}; formats: {', '.join(FORMATS)}")
