"""`stormwatch tail`'s readable form of a record: one line, coloured on a terminal.

Decisions (records with a `decision_type`: health, breaker, retry_gate, retry_storm, scaling) are formatted from
their common fields: window end, type, entity, state (a breaker's coloured as the dashboard draws it:
CLOSED green, OPEN red, HALF_OPEN / GRADUAL_RECOVERY yellow), health score (green at or above the
top retry tier, red below the breaker's open threshold, yellow between), reason, then every other
field as key=value and sequence / policy version at the end. Suspects, edges, edge events and topology
snapshots have their own short forms; any other JSON record is printed compactly.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from stormwatch.dashboard import BOLD, DIM, GREEN, RED, YELLOW, Style
# Fields of a decision that its line shows in their own places.
_DECISION_FIELDS = {"decision_id", "sequence", "entity", "decision_type", "window_start_ms", "window_end_ms",
                    "policy_version", "reason_code", "state", "previous_state", "score", "status"}


def _clock(ms: int | None) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M:%S")
    except (TypeError, ValueError, OverflowError, OSError):  # missing, or not a time
        return "--:--:--"


def _scalar(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value).lower() if isinstance(value, bool) or value is None else str(value)


def _pairs(record: dict, skip: set[str]) -> str:
    return " ".join(f"{k}={_scalar(v)}" for k, v in record.items() if k not in skip)


def _decision(record: dict, style: Style) -> str:
    entity = record.get("entity") or {}
    parts = [_clock(record.get("window_end_ms")), style.paint(f"{str(record['decision_type']).upper():<10}", BOLD),
             f"{entity.get('key') or _scalar(entity):<32}"]
    if "state" in record:
        state = style.state(str(record["state"]))
        previous = record.get("previous_state")
        parts.append(state if previous in (None, record["state"]) else f"{state} <- {style.state(str(previous))}")
    if "score" in record:
        parts.append(style.score(record["score"]))
    if "status" in record:
        parts.append(style.paint(str(record["status"]), GREEN if record["status"] == "OK" else DIM))
    if record.get("reason_code"):
        parts.append(style.paint(str(record["reason_code"]), YELLOW))
    if rest := _pairs(record, _DECISION_FIELDS):
        parts.append(rest)
    parts.append(style.paint(f"[#{record.get('sequence', '?')} policy {record.get('policy_version', '?')}]", DIM))
    return "  ".join(parts)


def _suspect(record: dict, style: Style) -> str:
    flagged = style.paint("FLAGGED", RED) if record.get("flagged") else ""
    evidence = record.get("evidence")
    signal = ""
    if isinstance(evidence, str):
        try:
            signal = json.loads(evidence).get("signal", "")
        except (ValueError, AttributeError):
            pass
    return "  ".join(p for p in (
        _clock(record.get("window_end_ms")), style.paint(f"{'SUSPECT':<10}", BOLD),
        f"#{record['rank']} {record['service']:<24}", f"score={_scalar(record.get('score'))}",
        f"confidence={_scalar(record.get('confidence'))}", signal, flagged) if p)


def _edge(record: dict, style: Style) -> str:
    errors = (record.get("client_errors") or 0) + (record.get("server_errors") or 0)
    latency = " ".join(f"{q}={_scalar(record.get(f'latency_{q}_ms'))}" for q in ("p50", "p95", "p99"))
    return "  ".join(p for p in (
        _clock(record.get("window_end_ms")), style.paint(f"{'EDGE':<10}", BOLD),
        f"{record['caller']} -> {record['callee']}", f"calls={record['calls']}",
        style.paint(f"errors={record.get('client_errors')}/{record.get('server_errors')}", RED if errors else None),
        _retries(record, style), f"{latency} ms", _window(record)) if p)


def _retries(record: dict, style: Style) -> str:
    """`retries=40 (x1.5)`: how many calls repeated an attempt, and the amplification; nothing without."""
    if not record.get("retries"):
        return ""
    return style.paint(f"retries={record['retries']} (x{_scalar(record.get('amplification'))})", RED)


def _window(record: dict) -> str:
    """`sliding 30s` / `tumbling 60s`: the same edge comes in both kinds of window."""
    if record.get("window_kind") is None or record.get("window_start_ms") is None:
        return ""
    return f"{record['window_kind']} {(record['window_end_ms'] - record['window_start_ms']) // 1000}s"


def _edge_event(record: dict, style: Style) -> str:
    event = str(record["event"])
    return "  ".join((_clock(record.get("window_end_ms")),
                      style.paint(f"{event:<10}", GREEN if event.endswith("APPEARED") else RED),
                      f"{record['caller']} -> {record['callee']}"))


def _snapshot(record: dict, style: Style) -> str:
    edges = record.get("edges")
    edges = json.loads(edges) if isinstance(edges, str) else edges or []
    return "  ".join((_clock(record.get("window_end_ms")), style.paint(f"{'TOPOLOGY':<10}", BOLD),
                      f"{len(record['services'])} services, {len(edges)} edges, depth {record.get('depth')}",
                      ", ".join(f"{e['caller']}->{e['callee']}" for e in edges)))


def format_record(record, style: Style) -> str:
    """One readable line of a decoded record."""
    if isinstance(record, dict):
        if "decision_type" in record:
            return _decision(record, style)
        if {"rank", "service", "score"} <= record.keys():
            return _suspect(record, style)
        if "event" in record and {"caller", "callee"} <= record.keys():
            return _edge_event(record, style)
        if {"caller", "callee", "calls"} <= record.keys():
            return _edge(record, style)
        if {"services", "edges"} <= record.keys():
            return _snapshot(record, style)
    return json.dumps(record, separators=(",", ":"))


def format_value(value: bytes, style: Style) -> str:
    """A Kafka record's value: formatted if it is JSON, else as text."""
    try:
        record = json.loads(value)
    except ValueError:
        return value.decode("utf-8", "replace")
    try:
        return format_record(record, style)
    except (KeyError, TypeError, ValueError, AttributeError):
        # A record that has the shape's fields but not their types: shown as it is.
        return json.dumps(record, separators=(",", ":"))
