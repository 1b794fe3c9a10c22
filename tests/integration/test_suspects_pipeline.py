"""The whole chain on real faults, through the real Kafka and Flink: spans, which ranks suspects in its
own job graph. After the fault-free baseline minute, the injected service ranks first once its fault
shows, and nothing is flagged in the baseline itself."""

from __future__ import annotations

import json

import pytest

from stormwatch.replay import collector_batches, otlp_json_lines, produce
from stormwatch.runtime.flink_cluster import FlinkCluster
from tests.conftest import read_topic, stormwatch
from tests.otlp_reference import SHARED_DATA, spans_of_file
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

ROLES = ("source", "sink", "dead_letters", "edges", "service_windows", "error_breaks", "latency_stages", "span_instances",
         "suspects", "topology_snapshots", "edge_events")
# A fault takes a while to show in what its service does: judged from this long after the label on
# (the same allowance as tests/unit/test_suspects.py, which explains it).
ONSET_MS = 30_000
# Whose errors stop before the labelled time: nothing in the data after the label points at it.
NOT_VISIBLE_AFTER_LABEL = {"2023-01-29_1004.otlp.jsonl"}


def test_injected_services_rank_first_and_the_baseline_flags_nothing(config, topics_for, tmp_path):
    labels = json.loads((SHARED_DATA / "labels.json").read_text())
    files = sorted(labels, key=lambda l: l["file"])  # names are their start times: event-time order
    names = topics_for(ROLES)
    messages = [m for label in files for m in collector_batches(otlp_json_lines(SHARED_DATA / label["file"]))]
    produce(config, names["source"], messages, partition=0)
    args = ["--bounded", *[f"--topic={role}={name}" for role, name in names.items()]]
    # The span path ranks each window in its own job graph, as it closes.
    result = stormwatch("run", "spans", "--", "--group-id", f"spans-{names['source']}", *args, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]

    suspects = read_topic(config, names["suspects"], 1, timeout=60)
    assert_valid("stormwatch_suspects", suspects)
    # The suspects job re-ranks the same windows from their topics: the same verdicts.
    again = {**names, **topics_for(("suspects", "topology_snapshots", "edge_events", "dead_letters"))}
    result = stormwatch("run", "suspects", "--", "--bounded", "--group-id", f"suspects-{names['source']}",
                        *[f"--topic={role}={name}" for role, name in again.items()], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    reranked = read_topic(config, again["suspects"], len(suspects), timeout=60)
    key = lambda s: json.dumps(s, sort_keys=True, default=str)  # noqa: E731
    assert sorted(map(key, reranked)) == sorted(map(key, suspects))
    by_window: dict[int, list[dict]] = {}
    for s in suspects:
        by_window.setdefault(s["window_start_ms"], []).append(s)
    for ranked in by_window.values():
        ranked.sort(key=lambda s: s["rank"])
        assert [s["rank"] for s in ranked] == list(range(1, len(ranked) + 1))

    for label in files:
        spans = spans_of_file(SHARED_DATA / label["file"])
        begin_ms, end_ms = min(s.start for s in spans) // 10**6, max(s.end for s in spans) // 10**6
        inside = {w: r for w, r in by_window.items() if begin_ms <= w and r[0]["window_end_ms"] <= end_ms}
        if label.get("fault_free"):
            # Its second half: the first taught the ranker what normal is.
            judged = [r for w, r in inside.items() if w >= (begin_ms + end_ms) // 2]
            assert judged and not [s for r in judged for s in r if s["flagged"]]
        elif label["file"] not in NOT_VISIBLE_AFTER_LABEL:
            root = label["root_cause_service"]
            after = {w: r for w, r in inside.items()
                     if w >= label["inject_unix_nano"] // 10**6 + ONSET_MS and any(s["service"] == root for s in r)}
            assert after, label["file"]
            firsts = {w: r[0]["service"] for w, r in after.items()}
            assert set(firsts.values()) == {root}, (label["file"], firsts)

    # A window's records that came after it was ranked are dead letters, never a second verdict.
    stragglers = read_topic(config, names["dead_letters"], 0, timeout=5)
    assert_valid("stormwatch_dead_letters", stragglers)
    assert all("already ranked" in d["reason"] and d["job"] == "suspects" for d in stragglers)
    snapshots = read_topic(config, names["topology_snapshots"], 1, timeout=30)
    assert_valid("stormwatch_topology_snapshots", snapshots)
    assert len({s["window_end_ms"] for s in snapshots}) == len(snapshots), "one snapshot a window"
    for snapshot in snapshots:
        edges = json.loads(snapshot["edges"])
        assert {e["caller"] for e in edges} | {e["callee"] for e in edges} == set(snapshot["services"])
    assert any(s["entry_points"] == ["user"] for s in snapshots)
    events = read_topic(config, names["edge_events"], 1, timeout=30)
    assert_valid("stormwatch_edge_events", events)
    assert {e["event"] for e in events} >= {"EDGE_APPEARED"}

    # The views users query, through the distribution's SQL client on the standalone cluster.
    cluster = FlinkCluster(config)
    cluster.start()
    try:
        query = tmp_path / "query.sql"
        query.write_text("SELECT `rank`, service, score, flagged FROM latest_suspects WHERE `rank` <= 3;\n"
                         "SELECT caller, callee, calls, p95_ms FROM current_edges WHERE caller = 'user';\n")
        answer = stormwatch("sql", *[f"--topic={role}={name}" for role, name in names.items()], "--file", str(query))
    finally:
        cluster.stop()
    assert answer.returncode == 0, answer.stdout[-3000:]
    newest = max(by_window)
    assert by_window[newest][0]["service"] in answer.stdout, answer.stdout[-3000:]
    assert "3 rows in set" in answer.stdout and "ts-gateway-service" in answer.stdout, answer.stdout[-3000:]
