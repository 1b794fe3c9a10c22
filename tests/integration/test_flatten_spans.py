"""flatten_spans through the real Kafka and Flink: real TrainTicket traces in, one row per span out,
everything unusable in the dead letters with its reason."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from connectors.kafka import consumer
from reference.otlp import SHARED_DATA, Span, otlp_json_lines, spans_of_file
from stormwatch.config import DEFAULT_CONFIG, load
from stormwatch.replay import produce
from tests.conftest import TEST_CONFIG, read_topic, stormwatch
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

FAULT_FREE = SHARED_DATA / "2023-01-29_0850_fault_free.otlp.jsonl"
EXCEPTION_FAULT = SHARED_DATA / "2023-01-29_1004.otlp.jsonl"

GOOD_ID = "0af7651916cd43dd8448eb211c80319c"


def _span(**fields) -> dict:
    span = {"traceId": GOOD_ID, "spanId": "b7ad6b7169203331", "name": "op", "kind": 2,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000005000000"}
    span.update(fields)
    return {k: v for k, v in span.items() if v is not None}


def _request(*spans: dict, service: str = "hand-made") -> bytes:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}).encode()


# A consumer span linked to the producers of the messages it processed (OTLP span links).
LINKS = [(GOOD_ID, "b7ad6b7169203331"), ("1" * 32, "2" * 16)]
LINKED = _request(_span(spanId="00f067aa0ba90300", name="consumer", kind=5,
                        links=[{"traceId": t, "spanId": s, "attributes": []} for t, s in LINKS]), service="billing")


def _take_linked(rows: list[dict]) -> list[dict]:
    """The rows other than LINKED's span, whose links must have come through."""
    (linked,) = [r for r in rows if r["span_name"] == "consumer"]
    assert [(link["trace_id"], link["span_id"]) for link in linked["links"]] == LINKS
    return [r for r in rows if r["span_name"] != "consumer"]


# Each hostile message, and the reason the dead letters must give for it.
HOSTILE = [
    (b"this is not json", "not a JSON object"),
    (b"[1, 2, 3]", "not a JSON object"),
    (b'{"resourceSpans": 5}', "no resourceSpans array"),
    (b'{"somethingElse": []}', "no resourceSpans array"),
    (_request(_span(traceId="abc")), "traceId is not 32 hex digits"),
    (_request(_span(traceId="0" * 32)), "traceId is all zeros"),
    (_request(_span(traceId=None)), "traceId missing"),
    (_request(_span(spanId="xyz")), "spanId is not 16 hex digits"),
    (_request(_span(parentSpanId="12")), "parentSpanId is neither empty nor 16 hex digits"),
    (_request(_span(startTimeUnixNano="soon")), "startTimeUnixNano or endTimeUnixNano missing"),
    (_request(_span(endTimeUnixNano="1600000000000000000")), "endTimeUnixNano is before startTimeUnixNano"),
]


KINDS = {1: "SPAN_KIND_INTERNAL", 2: "SPAN_KIND_SERVER", 3: "SPAN_KIND_CLIENT"}


def _as_reference(row: dict) -> Span:
    assert row["key"] == row["trace_id"].encode(), "keyed by trace id"
    assert row["duration_ms"] == pytest.approx((row["end_time_unix_nano"] - row["start_time_unix_nano"]) / 1e6)
    return Span(
        trace_id=row["trace_id"], span_id=row["span_id"], parent_span_id=row["parent_span_id"],
        service_name=row["service_name"], service_instance_id=row["service_instance_id"], name=row["span_name"],
        kind={v: k for k, v in KINDS.items()}[row["span_kind"]], error=row["status_code"] == "STATUS_CODE_ERROR",
        start=row["start_time_unix_nano"], end=row["end_time_unix_nano"],
        peer_service=row["peer_service"], db_system=row["db_system"], server_address=row["server_address"],
    )


def _assert_one_dead_letter_each(dead: list[dict], reasons: list[str]) -> None:
    """Each expected reason (a prefix) is given by a dead letter of its own, and no dead letter is left over."""
    given = sorted(d["reason"] for d in dead)
    for reason in reasons:
        match = [r for r in given if r.startswith(reason)]
        assert match, f"no dead letter says {reason!r}: {given}"
        given.remove(match[0])
    assert not given, f"dead letters nobody expected: {given}"


def _check_flattened(rows: list[dict], expected: list[Span]) -> None:
    # A multiset: the real data holds spans exported twice, and each copy must come out once.
    assert Counter(map(_as_reference, rows)) == Counter(expected)


def _flatten_spans(topics: dict[str, str], *run_options: str, bounded: bool = True, config=TEST_CONFIG):
    """`stormwatch run flatten_spans [run_options] -- ...` over the test's topics, which must succeed."""
    result = stormwatch(
        "run", "flatten_spans", *run_options, "--", *(["--bounded"] if bounded else []),
        "--group-id", f"g-{topics['source']}", *[f"--topic={role}={name}" for role, name in topics.items()],
        config=config,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _check_outputs(config, topics: dict[str, str], expected: list[Span],
                   hostile: list[tuple[bytes, str]]) -> tuple[list[dict], list[dict]]:
    """The sink holds `expected` and LINKED's span, the dead letters one for each `hostile` message and
    no more, all as their schemas say; returns (rows, dead letters)."""
    rows = read_topic(config, topics["sink"], len(expected) + 1)
    assert_valid("stormwatch_spans", rows)
    _check_flattened(_take_linked(rows), expected)
    dead = read_topic(config, topics["dead_letters"], len(hostile))
    assert_valid("stormwatch_dead_letters", dead)
    _assert_one_dead_letter_each(dead, [reason for _, reason in hostile])
    return rows, dead


def test_embedded_job_flattens_real_traces_and_dead_letters_the_rest(config, topics):
    expected = spans_of_file(FAULT_FREE) + spans_of_file(EXCEPTION_FAULT)
    good_sibling = _span(spanId="00f067aa0ba902b7", name="valid-neighbour")
    messages = [
        *otlp_json_lines(FAULT_FREE),
        *[m for m, _ in HOSTILE],
        # A bad span does not take its valid neighbour in the same message down with it.
        _request(_span(spanId="bad"), good_sibling),
        LINKED,
        *otlp_json_lines(EXCEPTION_FAULT),
    ]
    produce(config, topics["source"], messages)

    _flatten_spans(topics)

    rows = read_topic(config, topics["sink"], len(expected) + 2)
    assert_valid("stormwatch_spans", rows)
    rows = _take_linked(rows)
    neighbour = [r for r in rows if r["span_name"] == "valid-neighbour"]
    assert len(neighbour) == 1 and neighbour[0]["service_name"] == "hand-made"
    _check_flattened([r for r in rows if r["span_name"] != "valid-neighbour"], expected)
    assert sum(r["status_code"] == "STATUS_CODE_ERROR" for r in rows) == 27 + 40  # labels.json

    dead = read_topic(config, topics["dead_letters"], len(HOSTILE) + 1)
    assert_valid("stormwatch_dead_letters", dead)
    assert len(dead) == len(HOSTILE) + 1
    _assert_one_dead_letter_each(dead, [reason for _, reason in HOSTILE] + ["spanId is not 16 hex digits"])
    assert all(d["source_topic"] == topics["source"] and d["source_offset"] >= 0 for d in dead)
    assert all(d["job"] == "flatten_spans" for d in dead)


def _second_of_spans(second: int, partition: int, spans: int = 60) -> bytes:
    """One Collector-like batch: `spans` spans ending within second `second`, each with an attribute
    large enough that Kafka's default fetch of 1 MiB would hold about 25 s of them."""
    base_ns = 1_700_000_000 * 10**9 + second * 10**9
    return _request(*[
        _span(traceId=f"{partition + 1:08x}{second:08x}{i:016x}", spanId=f"{i + 1:016x}",
              startTimeUnixNano=str(base_ns + i * 1000), endTimeUnixNano=str(base_ns + i * 6_000_000),
              attributes=[{"key": "padding", "value": {"stringValue": "x" * 400}}])
        for i in range(spans)
    ])


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_backlog_comes_out_in_event_time_order_to_within_the_out_of_orderness(config, topics, parallelism,
                                                                                  tmp_path):
    # A job starting behind its input (a restart, a slow start) reads a backlog from every partition at
    # once; the next jobs' watermark must still see the spans of each partition nearly in order, whether
    # one subtask reads both input partitions or each has its own.
    seconds = 120
    for partition in (0, 1):
        produce(config, topics["source"], (_second_of_spans(s, partition) for s in range(seconds)), partition)
    job_config = tmp_path / "stormwatch.toml"
    job_config.write_text(f"base = {str(config.path)!r}\n[flink]\nparallelism = {parallelism}\n")
    _flatten_spans(topics, config=job_config)

    client = consumer(config, topics["sink"], consumer_timeout_ms=5000)
    latest: dict[int, int] = {}
    behind_ns, spans = 0, 0
    try:
        for message in client:
            end = json.loads(message.value)["end_time_unix_nano"]
            latest[message.partition] = max(latest.get(message.partition, end), end)
            behind_ns = max(behind_ns, latest[message.partition] - end)
            spans += 1
    finally:
        client.close()
    assert spans == 2 * seconds * 60
    allowed_s = load(DEFAULT_CONFIG).get("pipeline", "spans", "watermark_out_of_orderness_seconds")  # the default, not the tests'
    assert behind_ns / 1e9 < allowed_s


def test_job_submitted_to_standalone_cluster_streams_from_kafka_to_kafka(config, topics, flink_cluster, tmp_path):
    expected = spans_of_file(FAULT_FREE)
    job_id = _flatten_spans(topics, "--cluster", bounded=False).stdout.split()[-1]
    assert [j["state"] for j in flink_cluster.jobs() if j["jid"] == job_id] == ["RUNNING"]

    # Produced after submission: the running streaming job picks the spans up as they arrive.
    produce(config, topics["source"], otlp_json_lines(FAULT_FREE))
    _check_flattened(read_topic(config, topics["sink"], len(expected)), expected)

    flink_cluster.cancel(job_id)
    query = tmp_path / "query.sql"
    query.write_text("SELECT COUNT(*) AS spans_seen FROM stormwatch_spans;\n")
    answer = stormwatch("sql", "--topic", f"sink={topics['sink']}", "--file", str(query))
    assert answer.returncode == 0, answer.stdout[-3000:]
    assert re.search(rf"\|\s+{len(expected)}\s+\|", answer.stdout), answer.stdout[-3000:]

    assert "already running" in stormwatch("flink", "start").stdout
    assert "stopped" in stormwatch("flink", "stop").stdout
    assert "not running" in stormwatch("flink", "status").stdout


def _proto_span(**fields):
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

    span = ProtoSpan(trace_id=bytes.fromhex(GOOD_ID), span_id=bytes.fromhex("b7ad6b7169203331"), name="op",
                     kind=ProtoSpan.SPAN_KIND_SERVER, start_time_unix_nano=1_700_000_000_000_000_000,
                     end_time_unix_nano=1_700_000_000_005_000_000)
    for name, value in fields.items():
        setattr(span, name, value)
    return span


def _proto_request(*spans) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.add(key="service.name").value.string_value = "hand-made"
    resource_spans.scope_spans.add().spans.extend(spans)
    return request.SerializeToString()


# Protobuf input: what cannot be an ExportTraceServiceRequest, and spans whose fields are wrong.
HOSTILE_PROTO = [
    (b"this is not protobuf", "not an OTLP ExportTraceServiceRequest in protobuf"),
    (_request(_span()), "not an OTLP ExportTraceServiceRequest in protobuf"),  # otlp_json on an otlp_proto topic
    (b"", "empty message"),
    (_proto_request(_proto_span(trace_id=b"\x01\x02")), "traceId is not 32 hex digits"),
    (_proto_request(_proto_span(trace_id=bytes(16))), "traceId is all zeros"),
    (_proto_request(_proto_span(span_id=b"")), "spanId is not 16 hex digits"),
    (_proto_request(_proto_span(parent_span_id=b"\x01")), "parentSpanId is neither empty nor 16 hex digits"),
    (_proto_request(_proto_span(start_time_unix_nano=0)), "startTimeUnixNano or endTimeUnixNano missing, zero"),
    (_proto_request(_proto_span(end_time_unix_nano=1_600_000_000_000_000_000)), "endTimeUnixNano is before"),
]


def test_otlp_proto_input_gives_the_same_rows_as_otlp_json_and_dead_letters_the_rest(config, topics, tmp_path):
    from connectors.otlp import encode_proto

    proto_config = tmp_path / "proto.toml"
    proto_config.write_text(f'base = {str(TEST_CONFIG)!r}\n[pipeline.spans]\nencoding = "otlp_proto"\n')
    expected = spans_of_file(FAULT_FREE)
    messages = [encode_proto(json.loads(m)) for m in otlp_json_lines(FAULT_FREE)]
    produce(config, topics["source"], messages[:5] + [m for m, _ in HOSTILE_PROTO] + [encode_proto(json.loads(LINKED))]
            + messages[5:])

    _flatten_spans(topics, config=proto_config)

    rows, _ = _check_outputs(config, topics, expected, HOSTILE_PROTO)
    assert sum(r["status_code"] == "STATUS_CODE_ERROR" for r in rows) == 27  # labels.json


# With the default encoding, auto: what is neither OTLP JSON nor protobuf, and spans of both that are wrong.
AUTO_NEITHER = "not a JSON object, nor an OTLP ExportTraceServiceRequest in protobuf"
HOSTILE_AUTO = [
    (b"this is neither", AUTO_NEITHER + " (it begins with neither '{' nor 0x0A"),
    (b"\nlooks like protobuf's first byte", AUTO_NEITHER + ": "),
    (b'{"resourceSpans": [', "not a JSON object (it begins with '{'"),
    (b"", "empty message"),
    (_proto_request(_proto_span(trace_id=b"\x01\x02")), "traceId is not 32 hex digits"),
    (_request(_span(traceId="abc")), "traceId is not 32 hex digits"),
]


def test_the_default_encoding_reads_json_and_protobuf_interleaved_on_one_topic(config, topics):
    from connectors.otlp import encode_proto

    assert config.get("pipeline", "spans", "encoding") == "auto"
    expected = spans_of_file(FAULT_FREE)
    # Message by message, as two Collectors writing to one topic would: one left at the exporter's
    # default (otlp_proto), one writing otlp_json.
    messages = [encode_proto(json.loads(m)) if i % 2 else m for i, m in enumerate(otlp_json_lines(FAULT_FREE))]
    produce(config, topics["source"], messages[:3] + [m for m, _ in HOSTILE_AUTO] + [encode_proto(json.loads(LINKED))]
            + messages[3:])

    _flatten_spans(topics)

    _, dead = _check_outputs(config, topics, expected, HOSTILE_AUTO)
    # Text stays text in a dead letter's payload.
    assert {d["payload"] for d in dead} >= {"this is neither", '{"resourceSpans": ['}
