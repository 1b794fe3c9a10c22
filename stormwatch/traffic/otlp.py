"""Generated spans as OTLP/JSON ExportTraceServiceRequests, as the OpenTelemetry Collector's kafka
exporter writes them with `encoding: otlp_json`; connectors/otlp.py holds the OTLP JSON pieces and turns a
request into the bytes of either encoding."""

from __future__ import annotations

from collections.abc import Iterable

from connectors.otlp import attributes_json, resource_json, span_json
from stormwatch.traffic import SCOPE
from stormwatch.traffic.generator import Span


def _span_json(span: Span) -> dict:
    # An UNSET status is {}, as the Collector writes it.
    status = {"code": int(span.status_code), "message": span.status_message} if span.status_code else {}
    return span_json(span.trace_id, span.span_id, span.parent_span_id, span.name, int(span.kind),
                     span.start_unix_nano, span.end_unix_nano, attributes_json(span.attributes), [], [], status)


def _export_request(spans: list[Span]) -> dict:
    by_resource: dict[tuple[str, str], list[dict]] = {}
    for span in spans:
        by_resource.setdefault((span.service, span.instance), []).append(_span_json(span))
    return {
        "resourceSpans": [
            {"resource": resource_json(service, instance), "scopeSpans": [{"scope": SCOPE, "spans": items}]}
            for (service, instance), items in by_resource.items()
        ]
    }


def to_export_requests(spans: Iterable[Span], max_spans_per_message: int = 256) -> list[dict]:
    """ExportTraceServiceRequests of at most `max_spans_per_message` spans each, keeping the spans' order
    across messages and grouping a message's spans by resource (service and instance) as the Collector does."""
    if max_spans_per_message < 1:
        raise ValueError(f"max_spans_per_message must be at least 1, got {max_spans_per_message}")
    spans = list(spans)
    return [
        _export_request(spans[i : i + max_spans_per_message])
        for i in range(0, len(spans), max_spans_per_message)
    ]
