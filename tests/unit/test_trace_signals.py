"""Shape signals (stormwatch/trace_signals.py) on hand-made traces, the per-trace facts they count
(stormwatch/traces.py), `stormwatch backtest`, and the score on the shared TrainTicket faults."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from stormwatch.backtest import rank, windows_of_spans
from stormwatch.cli import main as cli_main
from stormwatch.suspects import SuspectPolicy, SuspectRanker
from stormwatch.trace_signals import CALL_PATTERN, ERROR_AFTER_CALL, OPERATION_LATENCY, WindowShape
from stormwatch.traces import Span, assemble

SERVER, CLIENT, INTERNAL = 2, 3, 1
WINDOW_S = 20
POLICY = SuspectPolicy()


class TraceBuilder:
    """Spans of one trace: `visit` adds a service's SERVER span (and the caller's CLIENT span)."""

    def __init__(self, trace_id: str, start_ms: float):
        self.trace_id, self.spans, self.next_id = trace_id, [], 0

    def _id(self) -> str:
        self.next_id += 1
        return f"{self.next_id:016x}"

    def span(self, parent: str | None, service: str, name: str, kind: int, start: float, end: float, error=False) -> str:
        sid = self._id()
        self.spans.append(Span(self.trace_id, sid, parent, service, name, kind, error,
                               int(start * 1e6), int(end * 1e6)))
        return sid


def request(rng: random.Random, trace_id: str, t0: float, *, order_calls_payment=True, payment_wrong=False,
            refund=False, refund_slow=1.0) -> list[Span]:
    """gateway -> order (-> payment, charge or refund) -> catalog; times in ms with a little jitter."""
    b = TraceBuilder(trace_id, t0)
    j = lambda ms: ms * (1 + 0.1 * rng.random())  # noqa: E731
    root = b.span(None, "gateway", "/*", SERVER, t0, t0 + 200)
    c1 = b.span(root, "gateway", "HTTP POST", CLIENT, t0 + 1, t0 + 150)
    order = b.span(c1, "order", "/order", SERVER, t0 + 2, t0 + 149)
    t = t0 + 2 + j(5)
    order_failed = False
    if order_calls_payment:
        op = "/refund" if refund else "/charge"
        took = j(10) * (refund_slow if refund else 1.0)
        c2 = b.span(order, "order", "HTTP POST", CLIENT, t, t + took + 2)
        b.span(c2, "payment", op, SERVER, t + 1, t + 1 + took)
        t += took + 2
        if payment_wrong:
            # order fails on what payment answered, right after the call.
            b.span(order, "order", "OrderService.check", INTERNAL, t + 0.5, t + 1.5, error=True)
            order_failed = True
    if not order_failed:
        c3 = b.span(order, "order", "HTTP GET", CLIENT, t + 1, t + 1 + j(8))
        b.span(c3, "catalog", "/items", SERVER, t + 1.5, t + j(8))
    b.span(root, "gateway", "HTTP GET", CLIENT, t0 + 151, t0 + 190)
    b.span(b.spans[-1].span_id, "catalog", "/items", SERVER, t0 + 152, t0 + 189)
    return b.spans


def traffic(rng: random.Random, windows: range, per_window: int = 8, refunds: int = 2, fault=None, fault_from: int | None = None) -> list[Span]:
    spans = []
    for k in windows:
        for i in range(per_window):
            t0 = k * WINDOW_S * 1000 + i * (WINDOW_S * 1000 / per_window) + rng.random() * 100
            kwargs = {"refund": i < refunds}
            if fault is not None and fault_from is not None and k >= fault_from:
                kwargs.update(fault(i))
            spans += request(rng, f"{k:08x}{i:024x}", t0, **kwargs)
    return spans


def verdicts(spans: list[Span]):
    ranker = SuspectRanker(POLICY)
    windows = windows_of_spans(spans, WINDOW_S)
    return windows, rank(ranker, windows)


def shape_of(verdict, service: str, signal: str) -> list[dict]:
    suspect = next(s for s in verdict.suspects if s.service == service)
    return [e for e in suspect.evidence.get("shape", []) if e["signal"] == signal]


# ---------------------------------------------------------------------------------------------
# Per-trace facts.

def test_visits_own_time_inbound_gap_and_request_type():
    spans = request(random.Random(1), "t1", 0.0, payment_wrong=True)
    (trace,) = assemble(spans)
    order = next(v for v in trace.visits if v.service == "order")
    payment = next(v for v in trace.visits if v.service == "payment")
    assert trace.entry == ("gateway", "/*", "order", "/order")
    assert [c.callee for c in order.calls] == ["payment"]
    # order's SERVER span minus its CLIENT span to payment, plus the gap gateway's client span adds (2 ms).
    client = next(s for s in spans if s.service_name == "order" and s.kind == CLIENT)
    server = next(s for s in spans if s.service_name == "order" and s.kind == SERVER)
    expected = ((server.end - server.start) - (client.end - client.start)) / 1e6 + 2.0
    assert order.own_ms == pytest.approx(expected)
    assert order.inbound_gap_ms == pytest.approx(2.0)
    assert payment.inbound_gap_ms == pytest.approx(2.0)
    # The error origin at order comes right after the call to payment returned.
    assert order.error_origins == 1 and order.error_after == "payment"
    assert payment.error_after is None and not payment.error


def test_duplicated_spans_count_once():
    spans = request(random.Random(1), "t1", 0.0)
    (trace,) = assemble(spans + spans[:3])
    assert len(trace.visits) == 5   # gateway, order, payment, catalog twice


# ---------------------------------------------------------------------------------------------
# Each signal.

def test_normal_traffic_flags_nothing():
    _, vs = verdicts(traffic(random.Random(3), range(40)))
    assert not [v for v in vs[3:] if v.flagged]


def test_a_service_that_stops_calling_a_callee_is_ranked_first_by_its_call_pattern():
    spans = traffic(random.Random(5), range(30), fault=lambda i: {"order_calls_payment": False}, fault_from=25)
    windows, vs = verdicts(spans)
    for v in vs[25:]:
        assert v.suspects[0].service == "order", [(s.service, s.score) for s in v.suspects[:3]]
        (cp,) = [e for e in shape_of(v, "order", CALL_PATTERN) if e["key"][2] == "payment"]
        assert cp["value"] == 0 and cp["expected"] > 0.8 and cp["surprise"] >= POLICY.affected_surprise
        assert cp["examples"]
    assert vs[-1].suspects[0].flagged


def test_a_callee_whose_wrong_answers_make_its_caller_fail_gets_the_evidence():
    spans = traffic(random.Random(7), range(30), fault=lambda i: {"payment_wrong": True}, fault_from=25)
    _, vs = verdicts(spans)
    for v in vs[25:]:
        (ea,) = shape_of(v, "payment", ERROR_AFTER_CALL)
        assert ea["value"] == 8 and ea["surprise"] >= POLICY.affected_surprise and len(ea["examples"]) == POLICY.example_traces
        assert {s.service for s in v.suspects[:2]} == {"order", "payment"}


def test_a_slow_operation_among_fast_ones_of_the_same_service():
    spans = traffic(random.Random(9), range(30), fault=lambda i: {"refund_slow": 30.0}, fault_from=25)
    _, vs = verdicts(spans)
    for v in vs[25:]:
        assert v.suspects[0].service == "payment"
        latency = {e["key"][1]: e for e in shape_of(v, "payment", OPERATION_LATENCY)}
        assert latency["/refund"]["surprise"] >= POLICY.affected_surprise
        assert latency["/refund"]["value"] > 10 * latency["/refund"]["expected"]
        assert latency.get("/charge", {"surprise": 0})["surprise"] < POLICY.affected_surprise


def test_without_traces_the_ranker_is_the_aggregates_alone():
    windows = windows_of_spans(traffic(random.Random(3), range(6)), WINDOW_S)
    with_shape = rank(SuspectRanker(POLICY), windows, shape=True)
    without = rank(SuspectRanker(POLICY), windows, shape=False)
    assert all("shape" not in s.evidence for v in without for s in v.suspects)
    assert [v.window_start_ms for v in with_shape] == [v.window_start_ms for v in without]


def test_window_shape_is_the_same_whatever_the_order_of_traces():
    windows = windows_of_spans(traffic(random.Random(3), range(12), fault=lambda i: {"refund_slow": 30.0}, fault_from=9), WINDOW_S)
    a = [SuspectRanker(POLICY).observe(w.services, w.edges, WindowShape.of(w.traces)) for w in windows]
    b = [SuspectRanker(POLICY).observe(w.services, w.edges, WindowShape.of(list(reversed(w.traces)))) for w in windows]
    assert a == b


# ---------------------------------------------------------------------------------------------
# `stormwatch backtest` and the shared TrainTicket faults.

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def test_backtest_prints_one_json_line_per_window(tmp_path, capsys):
    spans = traffic(random.Random(3), range(4))
    requests = []
    for s in spans:
        requests.append({"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": s.service_name}}]},
                                            "scopeSpans": [{"spans": [{"traceId": s.trace_id.rjust(32, "0"), "spanId": s.span_id,
                                                                        "parentSpanId": s.parent_span_id or "", "name": s.name, "kind": s.kind,
                                                                        "startTimeUnixNano": str(s.start), "endTimeUnixNano": str(s.end),
                                                                        "status": {"code": 2 if s.error else 0}}]}]}]})
    path = tmp_path / "t.otlp.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in requests) + "\n")
    assert cli_main(["backtest", "--baseline", str(path), str(path), "--window-size", "20", "--window-slide", "20"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 4
    for line in lines:
        assert line["window_end_ms"] - line["window_start_ms"] == 20_000
        assert {s["service"] for s in line["suspects"]} == {"gateway", "order", "payment", "catalog"}
        assert [s["rank"] for s in line["suspects"]] == [1, 2, 3, 4] and line["flagged"] == []


@pytest.fixture(scope="module")
def shared_score():
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import rootcause_eval as ev

    fault_free, faults = ev.labelled()
    return [(f, ev.judge(SuspectPolicy(), fault_free, f)) for f in faults], ev.fault_free_flags(SuspectPolicy(), fault_free)


@pytest.mark.skipif(not (DATA / "trainticket-extra" / "labels.json").exists(), reason="shared data absent")
def test_the_shared_faults_hold_their_score(shared_score):
    outcomes, (flagged, judged, services) = shared_score
    assert flagged == 0, services
    firsts = {f.path.name for f, o in outcomes if o.rank == 1}
    # bench/results/rootcause_eval.md: these 8 are first at 60 s after the injection with the defaults.
    # Of the others, two exception faults show only before their label (errors of the service end
    # before or soon after it, the service is normal at +60 s), the network delay of 2023-01-30_1206
    # starts 65 s after its label, and 2023-01-29_0925's basic service has one failing visit in the
    # window: they are misses, counted as such there.
    assert {"2023-01-29_0903.otlp.jsonl", "2023-01-29_1331.otlp.jsonl", "2023-01-30_1151.otlp.jsonl",
            "2023-01-29_0843.otlp.jsonl", "2023-01-29_1012.otlp.jsonl", "2023-01-29_1449.otlp.jsonl",
            "2023-01-29_1423.otlp.jsonl", "2023-01-29_0852.otlp.jsonl"} <= firsts


def test_generated_retry_storm_ranks_llm_inference_first_within_two_slides():
    """The demo's storm (another system than TrainTicket: an AI chain with retries), generated at a
    low rate: llm-inference first, flagged, from the window ending two slides after the fault starts
    while the fault lasts, and nothing flagged before it."""
    from stormwatch.traffic.faults import Params
    from stormwatch.traffic.generator import TraceGenerator
    from stormwatch.traffic.otlp import to_export_requests
    from stormwatch.traffic.schedule import load_schedule
    from stormwatch.traces import spans_of_request

    schedule = load_schedule("storm")
    (fault,) = schedule.faults
    start_ns = 1_700_000_000_000_000_000
    generator = TraceGenerator(seed=7, start_unix_nano=start_ns, faults=schedule.faults, params=Params(retries=schedule.retries))
    spans = [s for batch in generator.generate(5.0, fault.end_s + 10) for r in to_export_requests(batch) for s in spans_of_request(r)]
    windows = windows_of_spans(spans, 30, 10)
    verdicts = rank(SuspectRanker(POLICY), windows)
    t0 = start_ns // 1_000_000
    fault_start_ms, fault_end_ms = t0 + fault.start_s * 1000, t0 + fault.end_s * 1000
    before = [v for w, v in zip(windows, verdicts) if w.end_ms <= fault_start_ms]
    during = [v for w, v in zip(windows, verdicts) if fault_start_ms + 20_000 <= w.end_ms <= fault_end_ms]
    assert before and during
    assert not [v.flagged for v in before if v.flagged]
    for v in during:
        assert v.suspects[0].service == "llm-inference" and v.suspects[0].flagged


def test_a_service_silent_in_a_window_keeps_its_last_score_drained():
    spans = traffic(random.Random(9), range(26), fault=lambda i: {"refund_slow": 30.0}, fault_from=25)
    # Window 26: nobody calls payment (order's calls fail over to nothing), catalog still answers.
    spans += traffic(random.Random(10), range(26, 27), refunds=0, fault=lambda i: {"order_calls_payment": False}, fault_from=26)
    windows, vs = verdicts(spans)
    before, after = (next(s for s in v.suspects if s.service == "payment") for v in vs[-2:])
    assert not any(r.service == "payment" for r in windows[-1].services)
    # Its operations vanishing is evidence of its own; the score is the larger of that and the last, drained.
    assert after.score >= before.score - POLICY.silent_drain - 1e-5
    assert after.evidence["signal"] in ("silent", "operation_rate")
    if after.evidence["signal"] == "silent":
        assert after.evidence["silent_since_ms"] == windows[-2].end_ms


def test_a_silent_service_without_other_evidence_keeps_its_drained_score():
    ranker = SuspectRanker(POLICY)
    windows = windows_of_spans(traffic(random.Random(9), range(26), fault=lambda i: {"refund_slow": 30.0}, fault_from=25), WINDOW_S)
    before = next(s for s in rank(ranker, windows)[-1].suspects if s.service == "payment")
    # The next window: the aggregates and traces of the other services only (payment answered nothing).
    nxt = windows_of_spans(traffic(random.Random(11), range(26, 27)), WINDOW_S)[-1]
    services = [r for r in nxt.services if r.service != "payment"]
    edges = [e for e in nxt.edges if "payment" not in (e.caller, e.callee)]
    verdict = ranker.observe(services, edges)
    after = next(s for s in verdict.suspects if s.service == "payment")
    assert after.evidence["signal"] == "silent" and after.evidence["silent_since_ms"] == windows[-1].end_ms
    assert after.score == pytest.approx(before.score - POLICY.silent_drain, abs=1e-5)
