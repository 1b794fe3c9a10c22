"""The planned Flink jobs compute each view once, however many outputs read it (jobs.common.define):
the per-span work — UNNEST of a message, deduplication, interval joins — is the whole cost of the span
chain, and a copy of it per INSERT multiplied that cost and its state."""

from __future__ import annotations

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


def test_flatten_spans_unnests_each_message_once(monkeypatch):
    # resourceSpans -> scopeSpans -> spans: three UNNESTs, shared by the span and dead-letter outputs.
    assert _plan(monkeypatch, jobs.flatten_spans.main).count("Correlate(") == 3


def test_the_span_path_pairs_no_span_through_a_join(monkeypatch):
    # One keyed operator per trace (attached from Java) does what a deduplication and four interval
    # joins did: none is planned, and each message is unnested once for spans and dead letters alike.
    plan = _plan(monkeypatch, jobs.spans.main)
    assert plan.count("Deduplicate(") == 0 and plan.count("IntervalJoin(") == 0 and plan.count("Join(") == 0
    assert plan.count("Correlate(") == 3
