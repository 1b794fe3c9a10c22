"""`stormwatch tail`'s readable lines (stormwatch/tail_format.py), plain and coloured."""

from __future__ import annotations

import json

import pytest

from stormwatch.dashboard import Style
from stormwatch.tail_format import format_record, format_value

PLAIN = Style(colour=False, good_score=0.8, bad_score=0.3)
COLOUR = Style(colour=True, good_score=0.8, bad_score=0.3)
RED, GREEN, YELLOW, DIM = "31", "32", "33", "90"
END_MS = 1_767_225_610_000  # 2026-01-01T00:00:10Z

BREAKER = {
    "decision_id": "d-1", "sequence": 42, "decision_type": "breaker",
    "entity": {"kind": "service", "key": "service:llm-inference", "service": "llm-inference"},
    "window_start_ms": END_MS - 10_000, "window_end_ms": END_MS, "policy_version": 3,
    "state": "OPEN", "previous_state": "CLOSED", "admitted_share": 0.0, "max_probes": 0,
    "reason_code": "ERROR_RATE_ABOVE_OPEN_THRESHOLD", "enforced": True,
    "inputs": {"calls": 120, "errors": 61}, "thresholds": {"open_below_score": 0.3},
}
HEALTH = {
    "decision_id": "d-2", "sequence": 7, "decision_type": "health", "entity": {"kind": "edge", "key": "edge:a->b"},
    "window_start_ms": END_MS - 10_000, "window_end_ms": END_MS, "policy_version": 3, "status": "OK",
    "score": 0.5, "error_rate": 0.125,
}
SUSPECT = {"service": "llm-inference", "window_start_ms": END_MS - 10_000, "window_end_ms": END_MS, "rank": 1,
           "score": 0.9134, "confidence": 0.7, "flagged": True, "threshold": 0.5,
           "evidence": json.dumps({"signal": "error_origins", "error_origins": 40})}
EDGE = {"caller": "gateway", "callee": "orchestrator", "callee_virtual": False, "window_end_ms": END_MS,
        "calls": 120, "client_errors": 2, "server_errors": 3,
        "latency_p50_ms": 12.0, "latency_p95_ms": 40.5, "latency_p99_ms": None}
SNAPSHOT = {"window_end_ms": END_MS, "services": ["gateway", "orchestrator", "user"], "entry_points": ["gateway"],
            "depth": 2, "edges": json.dumps([{"caller": "gateway", "callee": "orchestrator"},
                                             {"caller": "user", "callee": "gateway"}])}


def _paint(text: str, code: str) -> str:
    return f"\x1b[{code}m{text}\x1b[0m"


def test_a_breaker_decision_shows_its_state_change_reason_sequence_and_policy():
    line = format_record(BREAKER, PLAIN)
    assert line.startswith("00:00:10  BREAKER ")
    for part in ("service:llm-inference", "OPEN <- CLOSED", "ERROR_RATE_ABOVE_OPEN_THRESHOLD",
                 "admitted_share=0", "enforced=true", 'inputs={"calls":120,"errors":61}'):
        assert part in line
    assert line.endswith("[#42 policy 3]")
    assert "d-1" not in line and "window_start_ms" not in line  # fields shown in their own places are not repeated


def test_a_breaker_decision_coloured_as_the_dashboard_draws_states():
    line = format_record(BREAKER, COLOUR)
    assert f"{_paint('OPEN', RED)} <- {_paint('CLOSED', GREEN)}" in line
    assert _paint("ERROR_RATE_ABOVE_OPEN_THRESHOLD", YELLOW) in line
    assert line.endswith(_paint("[#42 policy 3]", DIM))


def test_an_unchanged_state_shows_no_previous_one():
    line = format_record({**BREAKER, "state": "HALF_OPEN", "previous_state": "HALF_OPEN"}, COLOUR)
    assert _paint("HALF_OPEN", YELLOW) in line and "<-" not in line


@pytest.mark.parametrize(("score", "text", "code"), [
    (0.95, "score=0.95", GREEN), (0.8, "score=0.80", GREEN), (0.5, "score=0.50", YELLOW),
    (0.3, "score=0.30", YELLOW), (0.29, "score=0.29", RED), (None, "score=n/a", DIM)])
def test_health_scores_are_coloured_by_the_thresholds(score, text, code):
    record = {**HEALTH, "score": score}
    assert _paint(text, code) in format_record(record, COLOUR)
    line = format_record(record, PLAIN)
    assert text in line and "\x1b[" not in line


def test_a_health_decision_line():
    line = format_record(HEALTH, PLAIN)
    assert line.startswith("00:00:10  HEALTH ")
    assert all(part in line for part in ("edge:a->b", "score=0.50", "OK", "error_rate=0.125", "[#7 policy 3]"))
    assert _paint("OK", GREEN) in format_record(HEALTH, COLOUR)


def test_a_suspect_line():
    line = format_record(SUSPECT, PLAIN)
    assert line.startswith("00:00:10  SUSPECT ")
    assert all(part in line for part in ("#1 llm-inference", "score=0.9134", "confidence=0.7", "error_origins", "FLAGGED"))
    assert _paint("FLAGGED", RED) in format_record(SUSPECT, COLOUR)
    assert "FLAGGED" not in format_record({**SUSPECT, "flagged": False, "evidence": "not json"}, PLAIN)


def test_an_edge_line():
    line = format_record(EDGE, PLAIN)
    assert line == "00:00:10  EDGE        gateway -> orchestrator  calls=120  errors=2/3  p50=12 p95=40.5 p99=none ms"
    assert _paint("errors=2/3", RED) in format_record(EDGE, COLOUR)
    assert "errors=0/0  " in format_record({**EDGE, "client_errors": 0, "server_errors": 0}, COLOUR)
    tumbling = {**EDGE, "window_kind": "tumbling", "window_start_ms": END_MS - 60_000}
    assert format_record(tumbling, PLAIN) == line + "  tumbling 60s"
    retried = {**EDGE, "retries": 40, "logical_calls": 80, "amplification": 1.5}
    assert "errors=2/3  retries=40 (x1.5)  p50=12" in format_record(retried, PLAIN)
    assert "retries" not in format_record({**EDGE, "retries": 0, "amplification": 1.0}, PLAIN)


@pytest.mark.parametrize(("event", "code"), [("EDGE_APPEARED", GREEN), ("EDGE_VANISHED", RED)])
def test_edge_events(event, code):
    record = {"caller": "orchestrator", "callee": "tool-runner", "event": event, "window_end_ms": END_MS}
    assert format_record(record, PLAIN) == f"00:00:10  {event:<10}  orchestrator -> tool-runner"
    assert _paint(f"{event:<10}", code) in format_record(record, COLOUR)


@pytest.mark.parametrize("edges", [SNAPSHOT["edges"], json.loads(SNAPSHOT["edges"])], ids=["json-string", "list"])
def test_a_topology_snapshot_line(edges):
    assert format_record({**SNAPSHOT, "edges": edges}, PLAIN) == (
        "00:00:10  TOPOLOGY    3 services, 2 edges, depth 2  gateway->orchestrator, user->gateway")


def test_a_record_without_a_window_end():
    assert format_record({k: v for k, v in EDGE.items() if k != "window_end_ms"}, PLAIN).startswith("--:--:--  EDGE")


@pytest.mark.parametrize(("value", "text"), [
    (b'{"b": 1, "a": [1, 2]}', '{"b":1,"a":[1,2]}'), (b"[1, 2]", "[1,2]"), (b"42", "42"),
    (b"plain text", "plain text"), (b"caf\xc3\xa9 \xff", "caf\u00e9 \ufffd"), (b"", "")])
def test_other_values_are_printed_compactly_or_as_text(value, text):
    assert format_value(value, PLAIN) == text


def _compact(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"))


# What each is shown as: the record's own compact JSON when a field its line needs cannot be shown,
# else its line with what can be shown (these parts in it).
WRONG_TYPES = {
    "breaker-entity-string": ({**BREAKER, "entity": "llm-inference"}, None),
    "breaker-window-end-string": ({**BREAKER, "window_end_ms": "yesterday"},
                                  ("--:--:--  BREAKER ", "service:llm-inference", "OPEN <- CLOSED", "[#42 policy 3]")),
    # a float far beyond any date
    "breaker-window-end-huge-float": ({**BREAKER, "window_end_ms": 1e20},
                                      ("--:--:--  BREAKER ", "service:llm-inference", "OPEN <- CLOSED", "[#42 policy 3]")),
    "health-score-string": ({**HEALTH, "score": "high"}, None),
    "suspect-service-null": ({**SUSPECT, "service": None}, None),
    "suspect-evidence-array": ({**SUSPECT, "evidence": "[1, 2]"},
                               ("00:00:10  SUSPECT ", "#1 llm-inference", "score=0.9134", "FLAGGED")),
    "edge-errors-string": ({**EDGE, "client_errors": "two"}, None),
    "edge-caller-calls-null": ({**EDGE, "caller": None, "calls": None},
                               ("00:00:10  EDGE ", "-> orchestrator", "errors=2/3", "p95=40.5")),
    "snapshot-edges-not-json": ({**SNAPSHOT, "edges": "not json"}, None),
    "snapshot-edges-numbers": ({**SNAPSHOT, "edges": [1, 2]}, None),
    "snapshot-services-number": ({**SNAPSHOT, "services": 3}, None),
    "edge-event-numbers": ({"caller": 1, "callee": 2, "event": None}, ("--:--:--  ", "1 -> 2")),
}


@pytest.mark.parametrize(("record", "parts"), WRONG_TYPES.values(), ids=WRONG_TYPES.keys())
def test_a_record_with_the_right_keys_but_wrong_types_does_not_raise(record, parts):
    line = format_value(json.dumps(record).encode(), PLAIN)
    if parts is None:
        assert line == _compact(record)
    else:
        assert line.startswith(parts[0]) and all(part in line for part in parts[1:]), line
        assert "\n" not in line
