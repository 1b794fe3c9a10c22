"""Root-cause ranking (stormwatch.suspects): hand-made windows, then the labelled TrainTicket faults.

Real-data criterion: a fresh ranker per fault file, primed on the fault-free file and the fault
file's own pre-injection windows (reference.trace_windows.fault_verdicts); judged are the windows that
lie wholly after the labelled injection (they start at or after it, so they end at least one window
size after it) and hold a span of the root-cause service (a service without traffic cannot show
anything). In *every* such window the root cause must rank first (20 s tumbling; 30 s sliding by
10 s) and be in the top 3 (10, 20, 30 s tumbling; 30/10 s sliding); the fault-free file's second
half, after a warm-up on its first, must flag nothing in every configuration.

Why no allowance after the label beyond the window itself: a window that starts at the label holds
only spans produced after the fault was injected, which is all the label tells us. How long a fault
then takes to bite is a property of the fault and the traffic, not something a test can fix without
reading it off the data (an earlier ONSET_S = 30 was set that way, and it dropped exactly the windows
that fail). The windows the ranker gets wrong under this rule are counted as misses: the
(fault, configuration) pairs below are strict xfails, each with what the data shows.
bench/rootcause_eval.py prints the rank in every post-injection window.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random

import pytest

from reference.otlp import Span, spans_of_file
from reference.trace_windows import (after_injection, aggregate, exclusive_ns, fault_verdicts, labelled_files,
                                     percentile, replay, window_starts, windows_of_file)
from stormwatch.suspects import (EdgeWindow, ServiceWindow, SuspectPolicy, SuspectRanker, WindowVerdict,
                                 ranked_edges)
from stormwatch.window_aggregates import TraceTiming, trace_times

WINDOW_MS = 20_000
POLICY = SuspectPolicy()

# ---------------------------------------------------------------------------------------------
# Hand-made windows: gateway -> order -> payment, gateway -> catalog; every gateway request calls
# order and catalog once, every order request calls payment once.
CALLEES = {"gateway": ["order", "catalog"], "order": ["payment"], "payment": [], "catalog": []}
NORMAL = {"gateway": (4.0, 0.0), "order": (6.0, 2.0), "payment": (10.0, 2.0), "catalog": (3.0, 2.0)}


def window(
    k: int,
    rng: random.Random,
    *,
    slow: dict[str, float] | None = None,
    gap: dict[str, float] | None = None,
    errors: dict[str, int] | None = None,
    requests: int = 10,
    extra: tuple[ServiceWindow, ...] = (),
) -> tuple[list[ServiceWindow], list[EdgeWindow]]:
    """Window k: per service, its self ms per request (times `slow`), the gap its callers see per
    call (times `gap`) and its error origins; a little lognormal jitter on every time."""
    slow, gap, errors = slow or {}, gap or {}, errors or {}
    start = k * WINDOW_MS
    self_ms = {s: NORMAL[s][0] * slow.get(s, 1.0) * math.exp(rng.gauss(0, 0.15)) for s in CALLEES}
    gap_ms = {s: NORMAL[s][1] * gap.get(s, 1.0) * math.exp(rng.gauss(0, 0.15)) for s in CALLEES}
    p50: dict[str, float] = {}
    for s in ("payment", "catalog", "order", "gateway"):
        p50[s] = self_ms[s] + sum(gap_ms[c] + p50[c] for c in CALLEES[s])
    services = [
        ServiceWindow(
            service=s,
            window_start_ms=start,
            window_end_ms=start + WINDOW_MS,
            spans=5 * requests,
            server_spans=requests,
            errors=errors.get(s, 0),
            error_origins=errors.get(s, 0),
            server_p50_ms=p50[s],
            server_p95_ms=1.5 * p50[s],
            # The CLIENT spans' exclusive time (the gaps to the callees) is part of the caller's.
            self_ms_total=requests * (self_ms[s] + sum(gap_ms[c] for c in CALLEES[s])),
            inbound_calls=0 if s == "gateway" else requests,
            inbound_gap_ms_total=0.0 if s == "gateway" else requests * gap_ms[s],
        )
        for s in CALLEES
    ]
    edges = [EdgeWindow(caller, callee, start, start + WINDOW_MS, requests, 0, errors.get(callee, 0), requests * gap_ms[callee]) for caller, callees in CALLEES.items() for callee in callees]
    return services + [dataclasses.replace(r, window_start_ms=start, window_end_ms=start + WINDOW_MS) for r in extra], edges


def primed(windows: int = 30, seed: int = 7) -> tuple[SuspectRanker, random.Random, list[WindowVerdict]]:
    """A ranker fed `windows` normal windows, catalog logging an error in every third."""
    ranker, rng = SuspectRanker(POLICY), random.Random(seed)
    verdicts = [ranker.observe(*window(k, rng, errors={"catalog": 1} if k % 3 == 0 else {})) for k in range(windows)]
    return ranker, rng, verdicts


def by_service(verdict: WindowVerdict) -> dict:
    return {s.service: s for s in verdict.suspects}


def test_normal_operation_with_background_errors_flags_nothing():
    _, _, verdicts = primed(60)
    assert not [v for v in verdicts[5:] if v.flagged]


def test_an_error_burst_ranks_its_service_first_and_its_failing_caller_is_explained():
    ranker, rng, _ = primed()
    twin, twin_rng = copy.deepcopy(ranker), copy.deepcopy(rng)
    verdict = ranker.observe(*window(30, rng, errors={"payment": 8, "order": 4}))
    first, suspects = verdict.suspects[0], by_service(verdict)
    assert first.service == "payment" and first.flagged and first.confidence > 1 - POLICY.flag_alpha
    assert first.evidence["signal"] == "error_origins" and first.evidence["excess_error_origins"] > 7
    assert first.evidence["explains"] == ["order"]
    order = suspects["order"]
    assert order.evidence["explained_by"] == ["payment"]
    # Explained, order's score is half what the same errors score when nothing explains them: the same
    # primed ranker and window, payment healthy (explained_discount = 0.5).
    alone = by_service(twin.observe(*window(30, twin_rng, errors={"order": 4})))["order"]
    assert alone.evidence["explained_by"] == [] and alone.score > 0
    assert order.score == pytest.approx(0.5 * alone.score, abs=1e-6)   # scores carry 6 decimals


def nb_upper_tail(k: int, r: float, p: float) -> float:
    """P(K >= k) for K ~ NegativeBinomial(r, p), summing the pmf Γ(j+r)/(Γ(r) j!) p^r (1-p)^j term by term."""
    return sum(math.exp(math.lgamma(j + r) - math.lgamma(r) - math.lgamma(j + 1) + r * math.log(p) + j * math.log(1 - p))
               for j in range(k, 20 * k + 2000))


def test_error_surprises_and_the_explained_discount_by_hand():
    # A ranker that has seen nothing: every service's error baseline is the prior alone, Gamma with
    # shape 0.1 around the prior rate 0.01 per span, i.e. 0.1 / 0.01 = 10 spans' worth. A window of 50
    # spans then has the negative-binomial predictive NB(r = 0.1, p = 10 / (10 + 50)).
    assert (POLICY.error_prior_shape, POLICY.error_prior_rate, POLICY.explained_discount) == (0.1, 0.01, 0.5)
    payment_surprise = -math.log10(nb_upper_tail(40, 0.1, 10 / 60))     # 4.929
    order_surprise = -math.log10(nb_upper_tail(20, 0.1, 10 / 60))       # 3.107: affected (>= 3)
    verdict = SuspectRanker(POLICY).observe(*window(0, random.Random(1), errors={"payment": 40, "order": 20}))
    suspects = by_service(verdict)
    assert [s.service for s in verdict.suspects[:2]] == ["payment", "order"]
    assert suspects["payment"].score == pytest.approx(payment_surprise, rel=1e-6)
    # order's errors are explained by payment's, its callee: half its surprise.
    assert suspects["order"].evidence["explained_by"] == ["payment"]
    assert suspects["order"].score == pytest.approx(0.5 * order_surprise, rel=1e-6)


def test_a_slow_callee_ranks_before_the_caller_it_slows_down():
    ranker, rng, _ = primed()
    twin, twin_rng = copy.deepcopy(ranker), copy.deepcopy(rng)
    # payment's own processing 50x; order, waiting on it, also spends 20x its own time (retries).
    verdict = ranker.observe(*window(30, rng, slow={"payment": 50.0, "order": 20.0}))
    suspects = by_service(verdict)
    assert verdict.suspects[0].service == "payment"
    assert suspects["payment"].evidence["self_time_ratio"] > 20
    order = suspects["order"]
    assert order.evidence["surprise"]["own_time"] >= POLICY.affected_surprise
    assert order.evidence["explained_by"] == ["payment"]
    assert "order" in suspects["payment"].evidence["explains"]
    # The same primed ranker and window with payment at its normal speed: nothing explains order, and
    # its score is twice the explained one (explained_discount = 0.5).
    alone = by_service(twin.observe(*window(30, twin_rng, slow={"order": 20.0})))["order"]
    assert alone.evidence["explained_by"] == [] and alone.score >= POLICY.affected_surprise
    assert order.score == pytest.approx(0.5 * alone.score, abs=1e-6)   # scores carry 6 decimals


def test_network_delay_inbound_gap_up_server_latency_flat_ranks_the_callee_first():
    ranker, rng, _ = primed()
    verdict = ranker.observe(*window(30, rng, gap={"payment": 300.0}))
    payment, order = by_service(verdict)["payment"], by_service(verdict)["order"]
    assert verdict.suspects[0].service == "payment"
    assert payment.evidence["inbound_gap_ratio"] > 100
    assert 0.5 < payment.evidence["server_latency_ratio"] < 2
    # The caller waits longer, but its own time net of the call's gap is normal.
    assert order.evidence["server_latency_ratio"] > 10
    assert order.evidence["surprise"]["self_time"] < POLICY.affected_surprise
    assert order.evidence["explains"] == []


def test_a_cpu_starved_caller_is_not_blamed_on_the_gap_its_callee_shows():
    ranker, rng, _ = primed()
    # order's pods starve: its processing is 30x and its client spans end late (payment's gap 20x).
    verdict = ranker.observe(*window(30, rng, slow={"order": 30.0}, gap={"payment": 20.0}))
    suspects = by_service(verdict)
    assert verdict.suspects[0].service == "order"
    assert suspects["payment"].evidence["surprise"]["inbound_gap"] >= POLICY.affected_surprise
    assert suspects["payment"].evidence["explained_by"] == ["order"]
    assert suspects["order"].evidence["explained_by"] == []


@pytest.mark.parametrize("fault", [{"errors": {"payment": 5}}, {"slow": {"payment": 30.0}}], ids=["errors", "latency"])
def test_an_ongoing_fault_does_not_become_the_new_normal(fault):
    ranker, rng, _ = primed()
    verdicts = [ranker.observe(*window(k, rng, **fault)) for k in range(30, 60)]
    assert all(v.suspects[0].service == "payment" for v in verdicts)
    assert verdicts[-1].suspects[0].score > 0.8 * verdicts[0].suspects[0].score


def test_a_service_never_seen_gets_a_prior_not_a_flag():
    ranker, rng, _ = primed()
    newcomer = ServiceWindow("audit", 0, 0, 20, 4, 1, 1, 50.0, 80.0, 200.0, 4, 10.0)
    verdict = ranker.observe(*window(30, rng, extra=(newcomer,)))
    audit = by_service(verdict)["audit"]
    assert not audit.flagged and audit.confidence < 1 - POLICY.flag_alpha
    # Nothing to compare its latency with yet: no latency evidence either way.
    assert audit.evidence["surprise"]["own_time"] == 0 and audit.evidence["own_time_baseline_ms"] is None
    assert not verdict.flagged


def test_same_input_same_output_whatever_the_order_of_records():
    def run(shuffle: bool) -> list[WindowVerdict]:
        ranker, rng, order = SuspectRanker(POLICY), random.Random(3), random.Random(11)
        out = []
        for k in range(40):
            services, edges = window(k, rng, slow={"payment": 30.0} if k >= 35 else {}, errors={"catalog": 1} if k % 3 == 0 else {})
            if shuffle:
                order.shuffle(services)
                order.shuffle(edges)
            out.append(ranker.observe(services, edges))
        return out

    assert run(False) == run(False) == run(True)


def test_records_of_different_windows_are_refused():
    services, edges = window(0, random.Random(1))
    later, _ = window(1, random.Random(1))
    with pytest.raises(ValueError, match="one window's records"):
        SuspectRanker(POLICY).observe(services[:2] + later[2:], edges)


def test_ties_are_broken_by_service_name():
    ranker = SuspectRanker(POLICY)
    services, edges = window(0, random.Random(1))
    assert [s.service for s in ranker.observe(services, edges).suspects] == sorted(CALLEES)


# ---------------------------------------------------------------------------------------------
# The reference aggregator's definitions.


def span(span_id: str, parent: str | None, service: str, kind: int, start_ms: float, end_ms: float, error: bool = False,
         trace: str = "t") -> Span:
    return Span(trace, span_id, parent, service, None, "op", kind, error, int(start_ms * 1e6), int(end_ms * 1e6))


def test_exclusive_time_subtracts_the_union_of_children_clipped_to_the_parent():
    parent = span("p", None, "a", 2, 0, 100)
    children = [span("c1", "p", "a", 1, 10, 40), span("c2", "p", "a", 1, 30, 50), span("c3", "p", "a", 3, 90, 130)]
    # Union of [10,40], [30,50] and [90,100] (c3 clipped): 50 ms covered.
    assert exclusive_ns(parent, children) == 50 * 1_000_000


def test_percentile_interpolates_between_closest_ranks():
    assert percentile([10.0, 20.0, 30.0, 40.0], 0.25) == 17.5
    assert percentile([5.0], 0.95) == 5.0


def test_window_starts_are_epoch_aligned_for_tumbling_and_sliding():
    assert window_starts(25_000, 20_000, 20_000) == [20_000]
    assert window_starts(25_000, 30_000, 10_000) == [0, 10_000, 20_000]
    assert window_starts(30_000, 30_000, 10_000) == [10_000, 20_000, 30_000]


def test_a_trace_is_windowed_by_its_end_and_its_pairs_add_up_to_the_callee_inbound_counts():
    spans = [
        span("g", None, "gateway", 2, 0, 19_990),
        span("gc", "g", "gateway", 3, 5, 19_985),
        # The whole trace ends in window 0.
        span("o", "gc", "order", 2, 10, 19_900, error=True),
        span("g2", None, "gateway", 2, 19_000, 21_000, trace="t2"),
        span("g2c", "g2", "gateway", 3, 19_010, 20_990, trace="t2"),
        # Ends in window 0, its trace in window 1: counted there, with its call.
        span("o2", "g2c", "order", 2, 19_020, 19_990, trace="t2"),
    ]
    w0, w1 = aggregate(spans, 20)
    order0 = next(r for r in w0.services if r.service == "order")
    assert (order0.spans, order0.server_spans, order0.errors, order0.error_origins) == (1, 1, 1, 1)
    assert (order0.inbound_calls, order0.inbound_gap_ms_total) == (1, pytest.approx(19_980.0 - 19_890.0))
    order1 = next(r for r in w1.services if r.service == "order")
    assert (order1.spans, order1.server_spans, order1.server_p50_ms, order1.inbound_calls) == (1, 1, 970.0, 1)
    assert order1.inbound_gap_ms_total == pytest.approx(1980.0 - 970.0)
    assert [(e.caller, e.callee, e.calls, e.server_errors) for e in w0.edges] == [("gateway", "order", 1, 1)]
    assert [(e.caller, e.callee, e.calls, e.server_errors) for e in w1.edges] == [("gateway", "order", 1, 0)]


def test_a_trace_without_its_root_is_placed_where_the_span_path_gives_up_waiting_for_it():
    timing = TraceTiming(quiet_s=5, root_wait_s=30, max_hold_s=60)
    spans = [span("r", None, "gateway", 2, 0, 2_000, trace="whole"),
             span("a", "lost", "order", 2, 0, 1_000, trace="orphan"),
             # Spans for 50 s without a root: given up 60 s after the first end.
             span("b", "lost", "order", 2, 0, 1_000, trace="long"), span("c", "lost", "order", 2, 0, 50_000, trace="long")]
    assert trace_times(spans, timing) == {"whole": 2_000, "orphan": 1_000 + 30_000 - 5_000, "long": 1_000 + 60_000 - 5_000}
    [w] = aggregate(spans[1:2], 30, timing=timing)
    assert w.start_ms == 0 and w.services[0].spans == 1  # 26 s: in the window [0, 30 s)


# ---------------------------------------------------------------------------------------------
# The labelled TrainTicket files (../shared/data/trainticket).

FILES = labelled_files()
FAULT_FREE, FAULTS = FILES[0], FILES[1:]
CONFIGS = {"tumbling-10s": (10, None), "tumbling-20s": (20, None), "tumbling-30s": (30, None), "sliding-30s-by-10s": (30, 10)}
TOP1_CONFIGS = ["tumbling-20s", "sliding-30s-by-10s"]
# The exception fault's errors (ts-travel-service failing trips/left) run from before the file
# starts to 32 s *before* the labelled injection; after it the service has no errors and its
# latency looks like the fault-free file's, so no ranking can find it there.
NOT_VISIBLE_AFTER_LABEL = {"2023-01-29_1004.otlp.jsonl"}
# The CPU-contention fault has not bitten yet in the first window after its label: ts-contacts-service
# serves a request in 10 ms 6.5 s after the label (as before it) and its next one, 26.3 s after, takes
# 503 ms. A window holding only the normal request cannot single it out.
NOT_YET_SLOW = "the root cause is not slow yet in the first window after the label (normal 10 ms request at +6.5 s, slow from +26.3 s)"
MISSES = {
    "top1": {
        ("2023-01-29_1331.otlp.jsonl", "tumbling-20s"): NOT_YET_SLOW + ": 15th in the +6-26 s window",
    },
    "top3": {
        ("2023-01-29_1331.otlp.jsonl", "tumbling-10s"): NOT_YET_SLOW + ": 11th in the +6-16 s window",
        ("2023-01-29_1331.otlp.jsonl", "tumbling-20s"): NOT_YET_SLOW + ": 15th in the +6-26 s window",
        ("2023-01-29_0903.otlp.jsonl", "tumbling-10s"): (
            "5th in the +17-27 s window of the return fault, behind ts-travel-service's error origins and "
            "three services' own-time or error surprises"),
    },
}
FAULT_FREE_MISSES = {
    "tumbling-30s": (
        "the warm-up is three 30 s windows; in the window from 08:49:30 ts-travel2-service's error origins "
        "(background errors) are flagged against it (score 5.0)"),
}

@pytest.fixture(scope="module")
def windows():
    cache: dict = {}

    def get(path, config):
        if (path, config) not in cache:
            cache[(path, config)] = windows_of_file(path, *CONFIGS[config])
        return cache[(path, config)]

    return get


def judged_ranks(windows, fault, config: str) -> list[int]:
    """The root cause's rank in each judged window (see the module docstring)."""
    post = after_injection(fault_verdicts(POLICY, windows(FAULT_FREE.path, config), windows(fault.path, config)), fault.inject_ms)
    return [
        v.rank_of(fault.root_cause_service)
        for w, v in post
        if any(r.service == fault.root_cause_service and r.spans for r in w.services)
    ]


def fault_params(configs: list[str], misses: dict[tuple[str, str], str]):
    def marks(f, c):
        if f.path.name in NOT_VISIBLE_AFTER_LABEL:
            return [pytest.mark.xfail(strict=True, reason="fault not visible after its label")]
        if (f.path.name, c) in misses:
            return [pytest.mark.xfail(strict=True, reason=misses[(f.path.name, c)])]
        return []

    return [pytest.param(f, c, id=f"{f.fault_type}-{c}", marks=marks(f, c)) for f in FAULTS for c in configs]


def test_spans_are_deduplicated_and_each_counted_once_per_tumbling_window(windows):
    fault = next(f for f in FAULTS if f.path.name == "2023-01-29_1004.otlp.jsonl")
    spans = spans_of_file(fault.path)
    unique = {(s.trace_id, s.span_id) for s in spans}
    assert len(unique) < len(spans)
    assert sum(r.spans for w in windows(fault.path, "tumbling-20s") for r in w.services) == len(unique)


def test_real_edges_into_a_service_add_up_to_its_inbound_calls_but_for_messaging(windows):
    # ts-food-service hands deliveries over a queue: an INTERNAL "send" span parents the SERVER span
    # of ts-delivery-service, an edge but no CLIENT->SERVER call. Every other pair is an HTTP call.
    for w in windows(FAULTS[0].path, "tumbling-20s"):
        for r in w.services:
            into = [e for e in w.edges if e.callee == r.service]
            calls, gap = sum(e.calls for e in into), sum(e.gap_ms_total for e in into)
            if r.service == "ts-delivery-service":
                assert calls >= r.inbound_calls == 0
            else:
                assert (calls, gap) == (r.inbound_calls, pytest.approx(r.inbound_gap_ms_total))


@pytest.mark.parametrize(("fault", "config"), fault_params(TOP1_CONFIGS, MISSES["top1"]))
def test_the_injected_service_ranks_first_after_the_label(windows, fault, config):
    ranks = judged_ranks(windows, fault, config)
    assert ranks and all(r == 1 for r in ranks), ranks


@pytest.mark.parametrize(("fault", "config"), fault_params(list(CONFIGS), MISSES["top3"]))
def test_the_injected_service_is_in_the_top_three_after_the_label(windows, fault, config):
    ranks = judged_ranks(windows, fault, config)
    assert ranks and all(r <= 3 for r in ranks), ranks


@pytest.mark.parametrize("config", [
    pytest.param(c, marks=[pytest.mark.xfail(strict=True, reason=FAULT_FREE_MISSES[c])] if c in FAULT_FREE_MISSES else [])
    for c in CONFIGS])
def test_the_fault_free_file_flags_nothing_after_a_warm_up_on_its_first_half(windows, config):
    fault_free = windows(FAULT_FREE.path, config)
    ranker = SuspectRanker(POLICY)
    replay(ranker, fault_free[: len(fault_free) // 2])
    flagged = [(v.window_start_ms, [s.service for s in v.flagged]) for v in replay(ranker, fault_free[len(fault_free) // 2 :]) if v.flagged]
    assert flagged == []


def test_the_ranker_weighs_edges_between_traced_services_only():
    def record(caller, callee, virtual=False):
        return {"caller": caller, "callee": callee, "callee_virtual": virtual, "window_start_ms": 0,
                "window_end_ms": 30_000, "calls": 5, "client_errors": 0, "server_errors": 1, "gap_ms_total": 2.0,
                "latency_p95_ms": 9.0}

    edges = ranked_edges([record("user", "gateway"), record("gateway", "cart"), record("cart", "postgresql", True)])
    assert edges == [EdgeWindow("gateway", "cart", 0, 30_000, 5, 0, 1, 2.0)]
