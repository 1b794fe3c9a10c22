"""OTLP/JSON pieces shared by the generated traces and metrics: attributes, resources, the scope, encoding."""

from __future__ import annotations

import json
from collections.abc import Iterable

# The instrumentation scope everything generated is reported under.
SCOPE = {"name": "stormwatch.traffic"}

# Attribute values the generator produces; OTLP/JSON writes an int64 as a string.
AttributeValue = str | int


def attributes_json(attributes: Iterable[tuple[str, AttributeValue]]) -> list[dict]:
    """OTLP/JSON KeyValues; int64 values are JSON strings (the proto3 JSON mapping)."""
    return [
        {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}}
        for key, value in attributes
    ]


def resource_json(service: str, instance: str) -> dict:
    return {"attributes": attributes_json([("service.name", service), ("service.instance.id", instance)])}


def encode(message: dict) -> bytes:
    """One Kafka message value: compact JSON, as the Collector's otlp_json encoding writes it."""
    return json.dumps(message, separators=(",", ":")).encode()
