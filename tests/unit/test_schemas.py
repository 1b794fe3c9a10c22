"""schemas/<topic>.schema.json against the DDL of the output tables in sql/tables."""

from __future__ import annotations

import json
import re

import pytest
from jsonschema import Draft202012Validator

from stormwatch import catalog
from stormwatch.config import DEFAULT_CONFIG, load
from stormwatch.sqlfiles import SQL_DIR, expand_decision_envelope
from tests.schemas import SCHEMA_DIR, assert_valid, schema_path

INPUT_TABLES = {"otlp_spans", "otlp_metrics", "raw_messages", "stormwatch_instance_metrics", "stormwatch_policy",
                "scaling_service_health"}
OUTPUT_TABLES = sorted(p for p in (SQL_DIR / "tables").glob("*.sql") if p.stem not in INPUT_TABLES)
JSON_TYPES = {"STRING": "string", "BIGINT": "integer", "INT": "integer", "DOUBLE": "number", "BOOLEAN": "boolean"}
COLUMN = re.compile(r"^\s*`(?P<name>\w+)`\s+(?P<type>.+?),?\s*$")


def _ddl(path) -> tuple[str, dict[str, str], str]:
    """(table name, {physical column: SQL type}, the WITH clause) of a CREATE TEMPORARY TABLE file."""
    text = expand_decision_envelope(path.read_text())
    match = re.search(r"^CREATE TEMPORARY TABLE (\w+) \($(.*?)^\) WITH \((.*)", text, re.S | re.M)
    assert match, f"{path.name}: no `CREATE TEMPORARY TABLE x (` ... `) WITH (`"
    columns = {}
    for line in match[2].splitlines():
        column = COLUMN.match(line)
        # Computed (`x` AS ...) and metadata columns are not written to the value.
        if column and not column["type"].startswith("AS ") and " METADATA " not in f" {column['type']} ":
            columns[column["name"]] = column["type"]
    return match[1], columns, match[3]


def _json_type(sql_type: str) -> tuple[str, str | None]:
    """(JSON type, JSON type of the items for an array); a ROW is an object."""
    array = re.fullmatch(r"ARRAY<(.+)>", sql_type)
    if array:
        return "array", _json_type(array[1])[0]
    return ("object" if sql_type.startswith("ROW<") else JSON_TYPES[sql_type]), None


def _is_decision_table(path) -> bool:
    """Decision topics are written by Python as canonical JSON (sql/sinks/decision_sink.sql); their
    typed tables declare the fields the views need, a prefix of what the records carry."""
    return "DECISION_ENVELOPE" in path.read_text()


def _topic_of(with_clause: str) -> str:
    """The topic the default configuration gives the table, by the placeholder of its options."""
    (placeholder,) = re.findall(r"\$\{(\w+_options)\}", with_clause)
    return catalog.topics(load(DEFAULT_CONFIG))[catalog.OUTPUTS[placeholder]]


def _schema(topic: str) -> dict:
    return json.loads(schema_path(topic).read_text())


def test_every_output_topic_has_a_schema_and_every_schema_an_output_topic():
    topics = {_topic_of(_ddl(p)[2]) for p in OUTPUT_TABLES}
    assert len(OUTPUT_TABLES) == len(topics)
    schemas = {p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json")}
    # Decision topics are written as canonical JSON (sql/sinks/): their schema may come before a typed table.
    configured = {catalog.topics(load(DEFAULT_CONFIG))[role] for role in catalog.OUTPUTS.values()}
    assert topics <= schemas <= configured


@pytest.mark.parametrize("path", OUTPUT_TABLES, ids=lambda p: p.stem)
def test_schema_lists_exactly_the_physical_columns_with_their_types(path):
    table, columns, with_clause = _ddl(path)
    assert table == path.stem
    schema = _schema(_topic_of(with_clause))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    properties = schema["properties"]
    if _is_decision_table(path):
        assert list(properties)[:len(columns)] == list(columns), "properties must start with the DDL's columns"
    else:
        assert list(properties) == list(columns), "properties must be the DDL's physical columns, in order"
        # Flink's JSON format writes every column, null where it is NULL.
        assert schema["required"] == list(columns)
    for name, sql_type in columns.items():
        prop = properties[name]
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        expected, items = _json_type(sql_type)
        assert [t for t in types if t != "null"] == [expected], f"{name}: {sql_type} is {expected}, not {types}"
        if items:
            assert prop["items"]["type"] == items, f"{name}: {sql_type} holds {items}"
        assert prop.get("description"), f"{name} has no description"
        if "enum" in prop and "null" in types:
            assert None in prop["enum"], f"{name}: nullable enum without null"


T = "4bf92f3577b34da6a3ce929d0e0e4736"
W = {"window_start_ms": 1767225600000, "window_end_ms": 1767225630000}
SAMPLES = {
    "stormwatch_spans": {
        "trace_id": T, "span_id": "00f067aa0ba902b7", "parent_span_id": None, "service_name": "frontend",
        "service_instance_id": "frontend-7d9f-x2", "span_name": "GET /cart", "span_kind": "SPAN_KIND_SERVER",
        "status_code": "STATUS_CODE_UNSET", "status_message": None, "peer_service": None, "db_system": None,
        "server_address": None, "links": None, "start_time_unix_nano": 1767225601000000000,
        "end_time_unix_nano": 1767225601042500000, "duration_ms": 42.5,
    },
    "stormwatch_dead_letters": {
        "source_topic": "otlp_spans", "source_partition": 1, "source_offset": 4711,
        "reason": "spanId is not 16 hex digits", "payload": '{"traceId":"' + T + '","spanId":"xyz"}',
        "job": "flatten_spans",
    },
    "stormwatch_edges": {
        "caller": "frontend", "callee": "cart", "callee_virtual": False, "window_kind": "sliding", **W, "calls": 3, "client_errors": 1,
        "server_errors": 1, "retries": 1, "logical_calls": 2, "amplification": 1.5, "latency_p50_ms": 12.0,
        "latency_p95_ms": 30.2, "latency_p99_ms": 31.8,
        "latency_bucket_bounds_ms": [10.0, 25.0, 50.0], "latency_buckets": [1, 2, 3], "gap_ms_total": 1.5,
        "example_trace_id": T, "example_error_trace_id": T,
    },
    "stormwatch_service_windows": {
        "service": "cart", **W, "spans": 5, "server_spans": 0, "errors": 1, "error_origins": 1,
        "errors_propagated": 1, "errors_absorbed": 0, "errors_surfaced": 0, "server_p50_ms": None,
        "server_p95_ms": None, "self_ms_total": 20.25, "inbound_calls": 3, "inbound_gap_ms_total": 1.5,
        "orphans": 0, "self_parents": 0, "example_trace_id": T,
    },
    "stormwatch_error_breaks": {
        "absorbing_service": "frontend", "failing_service": "cart", **W, "breaks": 1, "example_trace_id": T,
    },
    "stormwatch_latency_stages": {
        "service": "llm-gateway", "operation": "kv_cache.load", "span_kind": "SPAN_KIND_INTERNAL", **W, "spans": 4,
        "duration_mean_ms": 8.5, "duration_p95_ms": 14.0, "self_mean_ms": 8.5, "self_p95_ms": 14.0,
        "example_trace_id": T,
    },
    "stormwatch_suspects": {
        "service": "cart", **W, "rank": 1, "score": 4.2, "confidence": 0.99, "flagged": True, "threshold": 3.9,
        "evidence": json.dumps({"signal": "error_origins", "error_origins": 3, "surprise": {"error_origins": 4.2},
                                "explains": ["frontend"], "explained_by": []}),
    },
    "stormwatch_topology_snapshots": {
        "window_end_ms": W["window_end_ms"], "window_start_ms": W["window_start_ms"],
        "services": ["cart", "frontend", "user"], "entry_points": ["user"], "depth": 2,
        "edges": json.dumps([{"caller": "frontend", "callee": "cart", "calls": 3, "errors": 2, "latency_p95_ms": 30.2,
                              "callee_virtual": False, "first_seen_ms": 1767225600000}]),
    },
    "stormwatch_edge_events": {
        "caller": "frontend", "callee": "cart", "event": "EDGE_APPEARED", **W,
        "first_seen_ms": W["window_end_ms"], "last_seen_ms": W["window_end_ms"],
    },
}


@pytest.mark.parametrize("topic", sorted(SAMPLES))
def test_a_sample_record_validates_with_its_key_ignored(topic):
    assert_valid(topic, [{"key": b"whatever", **SAMPLES[topic]}])


def test_a_violation_names_the_record_and_the_field():
    good = SAMPLES["stormwatch_spans"]
    bad = {**good, "span_id": "00F067AA0BA902B7", "span_kind": "SERVER"}
    with pytest.raises(AssertionError, match=r"record 1, at span_id: .*does not match") as failure:
        assert_valid("stormwatch_spans", [good, bad, {k: v for k, v in good.items() if k != "duration_ms"}])
    assert "record 1, at span_kind: 'SERVER' is not one of" in str(failure.value)
    assert "record 2, at (the record): 'duration_ms' is a required property" in str(failure.value)
    with pytest.raises(AssertionError, match=r"record 0, at \(the record\): Additional properties"):
        assert_valid("stormwatch_edge_events", [{**SAMPLES["stormwatch_edge_events"], "extra": 1}])
