"""The planned Flink jobs compute each view once, however many outputs read it (jobs.common.define):
the per-span work — UNNEST of a message, deduplication, interval joins — is the whole cost of the span
chain, and a copy of it per INSERT multiplied that cost and its state."""

from __future__ import annotations

import re

import pytest

import jobs.common
import jobs.flatten_spans
import jobs.spans
from tests.conftest import TEST_CONFIG

pytestmark = pytest.mark.integration


def _plan(monkeypatch, job_main) -> str:
    plans = []
    monkeypatch.setattr(jobs.common.Inserts, "execute", lambda inserts, bounded: plans.append(inserts.statements.explain()))
    job_main(["--config", str(TEST_CONFIG), "--bounded"])
    (plan,) = plans
    return plan[plan.index("== Optimized Execution Plan =="):]


def test_flatten_spans_decodes_each_message_once(monkeypatch):
    # The `otlp` format turns a message into its span rows as the topic is read: no UNNEST in the plan,
    # and one reader of the topic, shared by the span and dead-letter outputs (no raw second reader).
    plan = _plan(monkeypatch, jobs.flatten_spans.main)
    assert "Correlate(" not in plan and "UNNEST" not in plan.upper()
    scans = [line for line in plan.splitlines() if "TableSourceScan(" in line]
    assert len(scans) == 1 and "table=[[default_catalog, default_database, otlp_spans" in scans[0], scans


def test_the_span_path_decodes_once_and_pairs_no_span_through_a_join(monkeypatch):
    # The job is partly DataStream (the trace assembler, the suspects ranker) and partly a statement
    # set: both plans together are the job. One keyed operator per trace does what a deduplication and
    # four interval joins did: none is planned. Each message is decoded once, as the topic is read (the
    # span path's own Kafka source, SpanSource, straight into span records: no table scan of otlp_spans,
    # no UNNEST, one reader for spans and dead letters alike), and each output's window aggregate is
    # planned once.
    plans = []

    def both(inserts, bounded):
        plans.append(inserts.statements.explain())
        plans.append(inserts.t_env._j_tenv.execEnv().getExecutionPlan())

    monkeypatch.setattr(jobs.common.Inserts, "execute", both)
    jobs.spans.main(["--config", str(TEST_CONFIG), "--bounded"])
    statements, stream = plans
    statements = statements[statements.index("== Optimized Execution Plan =="):]
    stream_nodes = re.findall(r'"type" : "([^"]*)"', stream)
    assert not [n for n in stream_nodes if "Join" in n or "Deduplicate" in n]
    assert "Join(" not in statements and "Deduplicate(" not in statements
    assert not [n for n in stream_nodes if n.startswith("Correlate[")] and "Correlate(" not in statements
    sources = [n for n in stream_nodes if n.startswith("Source: ") and "otlp_spans" in n]
    assert len(sources) == 1 and "otlp_spans" not in statements, (sources, stream_nodes)
    assert [n for n in stream_nodes if n == "assemble traces"] == ["assemble traces"]
    # service windows, sliding and tumbling edges, error breaks, latency stages; the per-instance figures
    # go to their topic as each assembler subtask made them (no aggregate: one writer per partition)
    windows = sum(n.startswith("GlobalWindowAggregate[") for n in stream_nodes) + statements.count("GlobalWindowAggregate(")
    assert windows == 5
