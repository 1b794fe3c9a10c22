"""Thousands of hostile messages through flatten_spans on the real Kafka and Flink
(tests/hostile_messages.py): the job finishes; every bad message gets exactly the dead letters it
deserves, each naming its offset and reason; every valid span, around and among them, comes out once."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from stormwatch.replay import otlp_json_lines, produce
from tests.conftest import read_topic, stormwatch
from tests.hostile_messages import Case, deep_trace, drawn, mutated
from tests.otlp_reference import SHARED_DATA, spans_of_file
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

GOOD = SHARED_DATA / "2023-01-29_0850_fault_free.otlp.jsonl"
MUTATED_FROM = SHARED_DATA / "2023-01-29_1004.otlp.jsonl"


def test_hostile_messages_are_dead_lettered_each_with_its_reason_and_good_ones_pass(config, topics):
    good_lines = list(otlp_json_lines(GOOD))
    good_rows = [(s.trace_id, s.span_id) for s in spans_of_file(GOOD)]
    hostile = drawn(1500) + mutated(list(otlp_json_lines(MUTATED_FROM)), 1000) + deep_trace(100_000)
    # Good messages between the hostile ones, so a bad message cannot take its neighbours down.
    messages: list[bytes] = []
    cases: list[Case | None] = []
    step = len(hostile) // len(good_lines) + 1
    for i, case in enumerate(hostile):
        if i % step == 0 and i // step < len(good_lines):
            messages.append(good_lines[i // step])
            cases.append(None)
        messages.append(case.payload)
        cases.append(case)
    messages += good_lines[len(hostile) // step + 1:]
    produce(config, topics["source"], messages, partition=0)

    result = stormwatch("run", "flatten_spans", "--", "--bounded", "--group-id", f"g-{topics['source']}",
                        *[f"--topic={role}={name}" for role, name in topics.items()], timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]

    expected_rows = Counter(good_rows) + Counter(r for case in hostile for r in case.rows)
    rows = read_topic(config, topics["sink"], sum(expected_rows.values()), timeout=300)
    assert Counter((r["trace_id"], r["span_id"]) for r in rows) == expected_rows

    expected_dead = sum(len(case.reasons) for case in hostile)
    dead = read_topic(config, topics["dead_letters"], expected_dead, timeout=120)
    assert_valid("stormwatch_dead_letters", dead)
    by_offset: dict[int, list[str]] = defaultdict(list)
    for letter in dead:
        assert letter["source_partition"] == 0 and letter["job"] == "flatten_spans"
        by_offset[letter["source_offset"]].append(letter["reason"])
    wrong = {}
    for offset, case in enumerate(cases):
        given = sorted(by_offset.pop(offset, []))
        wanted = sorted(case.reasons) if case else []
        if len(given) != len(wanted) or not all(g.startswith(w) for g, w in zip(given, wanted)):
            wrong[offset] = (wanted, given, (case.payload if case else messages[offset])[:300])
    assert not wrong, f"{len(wrong)} messages with the wrong dead letters, e.g. {list(wrong.items())[:5]}"
    assert not by_offset
