"""An independent, plain-Python reading of OTLP JSON, for tests to check the Flink jobs against."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trainticket"


# Span and spans_of_request read OTLP JSON again, as stormwatch/traces.py and connectors/otlp.py do,
# on purpose: this is what the tests hold the product to, so it shares none of its code (a bug there
# would otherwise pass here too). tests/unit/test_import_direction.py keeps it so.
@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    service_name: str
    service_instance_id: str | None
    name: str
    kind: int
    error: bool
    start: int
    end: int
    # Who a CLIENT span calls, from its own attributes (current semantic-convention names first).
    peer_service: str | None = None
    db_system: str | None = None
    server_address: str | None = None
    # (trace id, span id) of each span it links to, lower case.
    links: tuple[tuple[str, str], ...] = ()
    # http.request.resend_count: how often the client had sent the request before (None: absent).
    resend_count: int | None = None

    @property
    def untraced_callee(self) -> str:
        return self.peer_service or self.db_system or self.server_address or "unknown"


def spans_of_request(request: dict) -> list[Span]:
    out = []
    for rs in request["resourceSpans"]:
        attrs = {a["key"]: a["value"].get("stringValue") for a in rs["resource"].get("attributes", [])}
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                span_attrs = {a["key"]: a["value"].get("stringValue") for a in s.get("attributes", [])}
                out.append(
                    Span(
                        trace_id=s["traceId"].lower(),
                        span_id=s["spanId"].lower(),
                        parent_span_id=(s.get("parentSpanId") or "").lower() or None,
                        service_name=attrs.get("service.name", "unknown_service"),
                        service_instance_id=attrs.get("service.instance.id"),
                        name=s["name"],
                        kind=s.get("kind", 0),
                        error=s.get("status", {}).get("code") == 2,
                        start=int(s["startTimeUnixNano"]),
                        end=int(s["endTimeUnixNano"]),
                        peer_service=span_attrs.get("service.peer.name") or span_attrs.get("peer.service"),
                        db_system=span_attrs.get("db.system.name") or span_attrs.get("db.system"),
                        server_address=span_attrs.get("server.address"),
                        links=tuple((link["traceId"].lower(), link["spanId"].lower()) for link in s.get("links", [])),
                        resend_count=_count(s.get("attributes", []), "http.request.resend_count"),
                    )
                )
    return out


def _count(attributes: list[dict], key: str) -> int | None:
    """The first `key` attribute's integer value (OTLP JSON writes int64 as a string), if it is a count."""
    for a in attributes:
        if a.get("key") == key:
            value = a.get("value", {}).get("intValue")
            try:
                n = int(value)
            except (TypeError, ValueError):
                return None
            return n if n >= 0 else None
    return None


def spans_of_file(path: Path) -> list[Span]:
    with path.open() as f:
        return [span for line in f if line.strip() for span in spans_of_request(json.loads(line))]


def otlp_json_lines(path: Path) -> Iterator[bytes]:
    """The messages of an OTLP JSON lines file (one ExportTraceServiceRequest a line), as Kafka values."""
    with path.open("rb") as f:
        for line in f:
            line = line.strip()
            if line:
                yield line
