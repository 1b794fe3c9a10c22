"""The planned Flink jobs compute each view once, however many outputs read it (jobs.common.define):
the per-span work — UNNEST of a message, deduplication, interval joins — is the whole cost of the span
chain, and a copy of it per INSERT multiplied that cost and its state."""

from __future__ import annotations

import pytest

import jobs.common
import jobs.flatten_spans
import jobs.topology
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


def test_topology_deduplicates_each_span_once_and_joins_it_four_times(monkeypatch):
    plan = _plan(monkeypatch, jobs.topology.main)
    assert plan.count("Deduplicate(") == 1
    # span with parent, CLIENT span with its children, span with its children's coverage, linked
    # span with the span it links to: each an interval join bounded by the watermark.
    assert plan.count("IntervalJoin(") == 4
