"""Thousands of hostile messages through the real Kafka and Flink (tests/hostile_messages.py): the jobs
finish; every bad message gets exactly the dead letters it deserves, each naming its offset and reason;
every valid span, around and among them, comes out once."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from connectors.otlp import encode_proto
from reference.otlp import SHARED_DATA, otlp_json_lines, spans_of_file
from stormwatch.replay import produce
from tests.conftest import SPAN_PATH_ROLES, TEST_CONFIG, read_topic, run_bounded, stormwatch
from tests.hostile_messages import Case, big_trace, broken_protobuf, drawn, mutated
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

GOOD = SHARED_DATA / "2023-01-29_0850_fault_free.otlp.jsonl"
MUTATED_FROM = SHARED_DATA / "2023-01-29_1004.otlp.jsonl"


def interleaved(good: list[bytes], hostile: list[Case]) -> list[Case | bytes]:
    """The hostile cases with the good messages spread among them, so a bad message cannot take its
    neighbours down unnoticed."""
    out: list[Case | bytes] = []
    step = len(hostile) // len(good) + 1
    for i, case in enumerate(hostile):
        if i % step == 0 and i // step < len(good):
            out.append(good[i // step])
        out.append(case)
    return out + good[len(hostile) // step + 1:]


def check_flattened(config, topics, sent: list[Case | bytes]) -> None:
    """Rows: the good file's spans and every case's, once each. Dead letters of flatten_spans: at each
    offset exactly the case's reasons (prefixes), none for a good message."""
    expected_rows = Counter((s.trace_id, s.span_id) for s in spans_of_file(GOOD))
    expected_rows.update(r for case in sent if isinstance(case, Case) for r in case.rows)
    rows = read_topic(config, topics["sink"], sum(expected_rows.values()), timeout=300)
    assert Counter((r["trace_id"], r["span_id"]) for r in rows) == expected_rows

    expected_dead = sum(len(case.reasons) for case in sent if isinstance(case, Case))
    dead = [d for d in read_topic(config, topics["dead_letters"], expected_dead, timeout=120) if d["job"] == "flatten_spans"]
    assert_valid("stormwatch_dead_letters", dead)
    by_offset: dict[int, list[str]] = defaultdict(list)
    for letter in dead:
        assert letter["source_partition"] == 0
        by_offset[letter["source_offset"]].append(letter["reason"])
    wrong = {}
    for offset, case in enumerate(sent):
        given = sorted(by_offset.pop(offset, []))
        wanted = sorted(case.reasons) if isinstance(case, Case) else []
        if len(given) != len(wanted) or not all(g.startswith(w) for g, w in zip(given, wanted)):
            wrong[offset] = (wanted, given, (case.payload if isinstance(case, Case) else case)[:300])
    assert not wrong, f"{len(wrong)} messages with the wrong dead letters, e.g. {list(wrong.items())[:5]}"
    assert not by_offset


def test_hostile_json_is_dead_lettered_each_with_its_reason_and_good_messages_pass(config, topics_for):
    topics = topics_for(SPAN_PATH_ROLES)
    hostile = drawn(1500) + mutated(list(otlp_json_lines(MUTATED_FROM)), 1000) + big_trace(50_000, 50_000)
    sent = interleaved(list(otlp_json_lines(GOOD)), hostile)
    produce(config, topics["source"], [c.payload if isinstance(c, Case) else c for c in sent], partition=0)

    # the span path over what came through: duplicates, self-parents, spans decades apart, the 100k-span trace.
    run_bounded(topics, ["flatten_spans", "spans"])

    check_flattened(config, topics, sent)
    everything = read_topic(config, topics["dead_letters"], 1, timeout=60)
    # Spans decades apart in one stream: what ends behind the watermark is late, dead-lettered and counted.
    by_span_path = [d for d in everything if d["job"] == "spans"]
    late = [d for d in by_span_path if d["reason"].startswith(("late span", "span of a trace already assembled"))]
    assert [d for d in late if d["reason"].startswith("late span")]
    # Everything else the span path refused, its decoder refused: the same offsets and reasons as
    # flatten_spans', which reads the same messages through the same `otlp` format.
    assert_valid("stormwatch_dead_letters", by_span_path)
    late_ones = {id(d) for d in late}
    refused = Counter((d["source_offset"], d["reason"]) for d in by_span_path if id(d) not in late_ones)
    assert refused == Counter((d["source_offset"], d["reason"]) for d in everything if d["job"] == "flatten_spans")
    assert_valid("stormwatch_edges", read_topic(config, topics["edges"], 1, timeout=60))


def test_broken_protobuf_is_dead_lettered_and_good_messages_pass(config, topics, tmp_path):
    proto_config = tmp_path / "proto.toml"
    proto_config.write_text(f'base = {str(TEST_CONFIG)!r}\n[pipeline.spans]\nencoding = "otlp_proto"\n')
    good = [encode_proto(json.loads(m)) for m in otlp_json_lines(GOOD)]
    hostile = broken_protobuf([encode_proto(json.loads(m)) for m in otlp_json_lines(MUTATED_FROM)], 1000)
    sent = interleaved(good, hostile)
    produce(config, topics["source"], [c.payload if isinstance(c, Case) else c for c in sent], partition=0)

    result = stormwatch("run", "flatten_spans", "--", "--bounded", "--group-id", f"g-{topics['source']}",
                        *[f"--topic={role}={name}" for role, name in topics.items()], config=proto_config)
    assert result.returncode == 0, result.stderr[-3000:]
    check_flattened(config, topics, sent)
