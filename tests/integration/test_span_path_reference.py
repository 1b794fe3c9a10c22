"""The span path against the independent per-trace reference (reference/trace_windows.py), on every file
of the shared TrainTicket data, in both encodings the Collector's kafka exporter writes, and on one file
with both encodings interleaved message by message on one topic, read with the default encoding (auto):
every count of every service window and of every traced cross-service edge equals the reference's, the
summed times within rounding. (Percentiles are not compared: the job's come from log-scale histograms, the
reference's are exact; tests/unit and the Java tests check the histograms.)"""

from __future__ import annotations

import json
import math

import pytest

from connectors.otlp import encode_proto
from reference.otlp import SHARED_DATA, otlp_json_lines, spans_of_file
from reference.trace_windows import aggregate
from stormwatch.window_aggregates import TraceTiming
from stormwatch.replay import collector_batches, produce
from tests.conftest import SPAN_PATH_ROLES, TEST_CONFIG, read_topic, stormwatch
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

ROLES = SPAN_PATH_ROLES
FILES = sorted(SHARED_DATA.glob("*.otlp.jsonl"))  # names are their start times: event-time order
COUNTS = ("spans", "server_spans", "errors", "error_origins", "inbound_calls")
EDGE_COUNTS = ("calls", "client_errors", "server_errors", "retries")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-3)


@pytest.mark.parametrize("encoding", ["otlp_json", "otlp_proto"])
def test_every_window_of_every_file_equals_the_independent_reference(config, topics_for, tmp_path, encoding):
    assert len(FILES) >= 5, SHARED_DATA
    batches = [m for path in FILES for m in collector_batches(otlp_json_lines(path))]
    if encoding == "otlp_proto":
        batches = [encode_proto(json.loads(m)) for m in batches]
    run_config = tmp_path / f"{encoding}.toml"
    run_config.write_text(f'base = {str(TEST_CONFIG)!r}\n[pipeline.spans]\nencoding = "{encoding}"\n')
    _check_against_reference(config, topics_for(ROLES), FILES, batches, run_config)


def test_one_topic_of_both_encodings_equals_the_reference_each_encoding_alone_meets(config, topics_for):
    """A Collector left at its exporter's default (otlp_proto) and one writing otlp_json on one topic:
    the default configuration reads each message in its own encoding, so the outputs are the ones each
    encoding alone gives (the test above: both equal this reference)."""
    assert config.get("pipeline", "spans", "encoding") == "auto", "the default reads both"
    path = SHARED_DATA / "2023-01-29_0850_fault_free.otlp.jsonl"  # the smallest file: a short run
    batches = list(collector_batches(otlp_json_lines(path)))
    # Interleaved message by message; some JSON after a byte order mark and whitespace, as it may be written.
    mixed = [encode_proto(json.loads(m)) if i % 2 else b"\xef\xbb\xbf \n" + m if i % 4 == 2 else m
             for i, m in enumerate(batches)]
    assert len(mixed) >= 10 and sum(m.startswith(b"{") for m in mixed) >= 3
    _check_against_reference(config, topics_for(ROLES), [path], mixed, TEST_CONFIG)


def _check_against_reference(config, names: dict[str, str], files, batches: list[bytes], run_config) -> None:
    """Sends `batches` (the messages of `files`), runs the span path over them with `run_config` and
    compares its windows and edges with the reference's of `files`."""
    # One partition: a replay at full speed keeps event-time order only there (see the test config).
    produce(config, names["source"], batches, partition=0)
    result = stormwatch("run", "spans", "--", "--bounded", "--group-id", f"spans-{names['source']}",
                        *[f"--topic={role}={name}" for role, name in names.items()], config=run_config, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]

    topology = config.section("pipeline", "topology")
    expected = aggregate([s for path in files for s in spans_of_file(path)],
                         topology["window_size_seconds"], topology["window_slide_seconds"], TraceTiming.of(topology))
    services = {(r.window_start_ms, r.service): r for w in expected for r in w.services}
    edges = {(e.window_start_ms, e.caller, e.callee): e for w in expected for e in w.edges}

    rows = read_topic(config, names["service_windows"], len(services), timeout=120)
    assert_valid("stormwatch_service_windows", rows)
    got = {(r["window_start_ms"], r["service"]): r for r in rows}
    assert len(got) == len(rows), "one record per service and window"
    assert got.keys() == services.keys(), (sorted(got.keys() - services.keys())[:5],
                                           sorted(services.keys() - got.keys())[:5])
    for key, want in services.items():
        have = got[key]
        assert {f: have[f] for f in COUNTS} == {f: getattr(want, f) for f in COUNTS}, key
        assert _close(have["self_ms_total"], want.self_ms_total), (key, have["self_ms_total"], want.self_ms_total)
        assert _close(have["inbound_gap_ms_total"], want.inbound_gap_ms_total), key

    # The reference's edges are the traced pairs; the job adds `user` roots and untraced callees.
    all_edges = read_topic(config, names["edges"], len(edges), timeout=120)
    assert_valid("stormwatch_edges", all_edges)
    traced = {(e["window_start_ms"], e["caller"], e["callee"]): e for e in all_edges
              if e["window_kind"] == "sliding" and e["caller"] != "user" and not e["callee_virtual"]}
    assert traced.keys() == edges.keys(), (sorted(traced.keys() - edges.keys())[:5],
                                           sorted(edges.keys() - traced.keys())[:5])
    for key, want in edges.items():
        have = traced[key]
        assert {f: have[f] for f in EDGE_COUNTS} == {f: getattr(want, f) for f in EDGE_COUNTS}, key
        assert _close(have["gap_ms_total"], want.gap_ms_total), key

    # Valid input: nothing of it is a dead letter.
    assert [d for d in read_topic(config, names["dead_letters"], 0, timeout=5) if d["job"] == "spans"] == []
