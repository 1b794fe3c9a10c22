"""Pareto fronts and scaling decisions through the real Kafka and Flink: generated AI-chain traffic
through spans -> health -> scaling. llm-inference answers in seconds (per-token
decode) against the policy's 1000 ms SLO: saturated; retrieval answers in milliseconds: slack. Merged into
the same run, a second generator drives one more service, embedder, over its capacity and then drops
its load: saturated, then slack. A third, reranker, is slow and fails most of its calls throughout: its
breaker opens, and its scale-outs are held (issue 21: a failing service is not short of replicas). A
fourth, summarizer, is slow without errors (scaled out) until it starts failing: its breaker opens and
the scale-outs not running yet are revoked, as in the demo's storm on llm-inference."""

from __future__ import annotations

import json
import uuid

import pytest

from connectors.kafka import create_topics
from connectors.otlp import encode_json
from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import load as load_policy
from stormwatch.replay import produce
from stormwatch.traffic.faults import FaultWindow, LoadShape, Params
from stormwatch.traffic.generator import DEFAULT_START_UNIX_NANO, TraceGenerator
from stormwatch.traffic.otlp import to_export_requests
from stormwatch.traffic.topology import Instance, Service, Topology
from tests.conftest import SPAN_PATH_ROLES, TEST_CONFIG, read_topic, run_bounded, sql_client
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

# The span path's topics too (its suspects among them): none of its output may land in a default topic.
ROLES = (*SPAN_PATH_ROLES, "metrics", "instance_windows", "health", "breaker_decisions", "retry_decisions", "storm_decisions", "policy",
         "otlp_metrics", "pareto_fronts", "scaling_decisions")
POLICY = load_policy(PROJECT_ROOT / "config" / "policy.toml")
END_S = 600
# embedder: two instances sized for 10 traces/s at utilisation 0.8 (headroom 1.25), run at 1.6 times
# that (utilisation 1.28: queues full, p99 at its 2000 ms queue limit) until LOAD_DROP_S, then at 0.4
# times it (utilisation 0.32: tens of ms). Many workers an instance, so waits at low load stay short.
LOAD_DROP_S = 150
EMBEDDER = Topology(root="embedder", services=(
    Service("embedder", "POST /v1/embed", "http", base_ms=20.0,
            instances=(Instance(1.25, workers=16), Instance(1.25, workers=16))),))
FALLING_LOAD = LoadShape(((LOAD_DROP_S, 1.6), (LOAD_DROP_S, 0.4)))
# reranker: answers in about 1.5 s (above the 1000 ms SLO: the front says scale out) and fails 70 % of
# its calls (above the breaker's failure_rate_threshold, far above saturation_max_error_rate).
RERANKER = Topology(root="reranker", services=(
    Service("reranker", "POST /v1/rerank", "http", base_ms=1500.0, instances=(Instance(4.0), Instance(4.0))),))
FAILING = Params(error_rate=0.0, service_error_rates={"reranker": 0.7})
# summarizer: as slow as reranker (the front says scale out from its first warm windows on) without
# errors until FAILS_FROM_S, then failing 70 % of its calls: its breaker opens on a scale-out under way.
FAILS_FROM_S = 300
SUMMARIZER = Topology(root="summarizer", services=(
    Service("summarizer", "POST /v1/summarize", "http", base_ms=1500.0, instances=(Instance(4.0), Instance(4.0))),))
STARTS_FAILING = (FaultWindow(service="summarizer", start_s=FAILS_FROM_S, end_s=END_S, error_rate=0.7),)


@pytest.fixture(scope="module")
def decided(config, kafka, flink_cluster):
    suffix = uuid.uuid4().hex[:8]
    names = {role: f"test_{role}_{suffix}" for role in ROLES}
    create_topics(config, {name: {"partitions": 2} for name in names.values()})
    chain = (s for t in TraceGenerator(seed=5).generate(5.0, END_S) for s in t)
    # Its own generator (and random stream), so the chain's traffic is the same with or without it.
    falling = TraceGenerator(seed=6, topology=EMBEDDER, load=FALLING_LOAD, nominal_rate_per_s=10.0)
    failing = TraceGenerator(seed=7, topology=RERANKER, params=FAILING, nominal_rate_per_s=5.0)
    turning = TraceGenerator(seed=8, topology=SUMMARIZER, faults=STARTS_FAILING, params=Params(error_rate=0.0),
                             nominal_rate_per_s=5.0)
    spans = sorted([*chain, *(s for t in falling.generate(10.0, END_S) for s in t),
                    *(s for t in failing.generate(5.0, END_S) for s in t),
                    *(s for t in turning.generate(5.0, END_S) for s in t)], key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode_json(r) for r in to_export_requests(spans)], partition=0)
    run_bounded(names, ["spans", "health", "scaling"])
    return {"names": names, **_decisions(config, names)}


def _decisions(config, names: dict[str, str]) -> dict[str, list[dict]]:
    return {role: read_topic(config, names[role], 1, timeout=60)
            for role in ("pareto_fronts", "scaling_decisions", "breaker_decisions")}


# Topics the health and scaling jobs write (and the policy they read): fresh ones for a second run of
# both over the span path's outputs of `decided`.
DECISION_ROLES = ("dead_letters", "instance_windows", "health", "breaker_decisions", "retry_decisions", "storm_decisions",
                  "policy", "pareto_fronts", "scaling_decisions")
FORCED = "llm-inference"


@pytest.fixture(scope="module")
def forced(config, decided, tmp_path_factory):
    """health and scaling once more over the same span path outputs, under a policy file that forces
    llm-inference's breaker open from its first window (breaker.overrides FORCED_OPEN): saturated with
    almost no errors, it must scale out as it did with its breaker closed."""
    folder = tmp_path_factory.mktemp("forced")
    policy = folder / "policy.toml"
    text = (PROJECT_ROOT / "config" / "policy.toml").read_text()
    policy.write_text(text.replace("\noverrides = {}\n", f'\noverrides = {{ "service:{FORCED}" = "FORCED_OPEN" }}\n'))
    assert load_policy(policy).breaker.overrides == {f"service:{FORCED}": "FORCED_OPEN"}
    run_config = folder / "stormwatch.toml"
    run_config.write_text(f"base = {str(TEST_CONFIG)!r}\n[pipeline.policy]\nfile = {str(policy)!r}\n")
    suffix = uuid.uuid4().hex[:8]
    names = {**decided["names"], **{role: f"test_forced_{role}_{suffix}" for role in DECISION_ROLES}}
    create_topics(config, {names[role]: {"partitions": 2} for role in DECISION_ROLES})
    run_bounded(names, ["health", "scaling"], config=run_config)
    return _decisions(config, names)


def _of(records: list[dict], service: str) -> list[dict]:
    return sorted((r for r in records if r["entity"]["key"] == f"service:{service}"), key=lambda r: r["sequence"])


# A fresh clone's CI once saw a window of llm-inference emitted twice, the second time with an instance row
# that came after the window had closed: the scaling job's buffer (jobs/streams.py WindowBuffer) took the
# late row as a new window and its timer, already in the past, fired at the next watermark. Late rows go
# to the dead letters now; any there must name a window already out, and an instance not in its front.
def test_a_front_per_service_window_with_every_instance_accounted_for(config, decided):
    assert_valid("stormwatch_pareto_fronts", decided["pareto_fronts"])
    fronts = _of(decided["pareto_fronts"], "llm-inference")
    assert len({f["window_end_ms"] for f in fronts}) == len(fronts), "one front a window"
    assert any(f["front"] for f in fronts)
    # The first window (a partial one, and every instance still warming up) leaves every instance out.
    assert not fronts[0]["front"] and fronts[0]["excluded"]
    assert {e["reason"] for e in fronts[0]["excluded"]} <= {"TOO_FEW_CALLS", "WARMING_UP"}
    by_end = {}
    for f in fronts:
        instances = [p["instance"] for p in f["front"]] + [d["point"]["instance"] for d in f["dominated"]] + \
                    [e["point"]["instance"] for e in f["excluded"]]
        assert len(instances) == len(set(instances)) == f["counts"]["instances"]
        by_end[f["window_end_ms"]] = set(instances)
    late = [json.loads(d["payload"]) for d in read_topic(config, decided["names"]["dead_letters"], 10**6, timeout=15)
            if d["job"] == "scaling"]
    for row in late:
        if row["service"] == "llm-inference" and row["window_end_ms"] in by_end:
            assert row["instance"] not in by_end[row["window_end_ms"]], row


def test_saturated_instances_scale_out(decided):
    assert_valid("stormwatch_scaling_decisions", decided["scaling_decisions"])
    decisions = _of(decided["scaling_decisions"], "llm-inference")
    out = [d for d in decisions if d["action"] == "scale_out"]
    assert out, [(d["action"], d["reason_code"]) for d in decisions]
    # Seconds of latency against a 1000 ms SLO ask for more replicas than one period's limit allows.
    assert out[0]["recommendation"]["reason_code"] == "SATURATED_SCALE_OUT"
    assert out[0]["reason_code"] in ("SATURATED_SCALE_OUT", "RATE_LIMITED")
    assert out[0]["desired_replicas"] > out[0]["previous_desired_replicas"]
    assert out[0]["metric"]["latency_ms"] > out[0]["target"]["slo_ms"]
    assert not [d for d in decisions if d["action"] == "scale_in"]


def test_slack_scales_in_only_after_the_stabilization_window(decided):
    fronts = _of(decided["pareto_fronts"], "retrieval")
    decisions = _of(decided["scaling_decisions"], "retrieval")
    scale_in = [d for d in decisions if d["action"] == "scale_in"]
    assert scale_in and scale_in[0]["reason_code"] == "SLACK_SCALE_IN", [(d["action"], d["reason_code"]) for d in decisions]
    first_ms = fronts[0]["window_end_ms"]
    assert scale_in[0]["window_end_ms"] - first_ms >= POLICY.scaling.scale_down_stabilization_seconds * 1000
    assert not [d for d in decisions if d["action"] == "scale_out"]


def _holds_scale_in_back(front: dict) -> bool:
    """Whether a window's front recommends at least the current replicas whatever their number: no front
    (INSUFFICIENT_DATA), or its max-QPS point above the SLO (a scale-out, or WITHIN_TOLERANCE)."""
    top = front["front"] and max(front["front"], key=lambda p: (p["qps"], -p["latency_ms"]))
    return not top or top["latency_ms"] > POLICY.scaling.slo_for(front["service"])


def test_falling_load_scales_in_only_after_the_stabilization_window(decided):
    fronts = _of(decided["pareto_fronts"], "embedder")
    decisions = _of(decided["scaling_decisions"], "embedder")
    actions = [(d["window_end_ms"], d["action"], d["reason_code"]) for d in decisions]
    drop_ms = DEFAULT_START_UNIX_NANO // 10**6 + LOAD_DROP_S * 1000
    stabilization_ms = POLICY.scaling.scale_down_stabilization_seconds * 1000
    # High load: saturated, scaled out before the drop.
    out = [d for d in decisions if d["action"] == "scale_out"]
    assert out and out[0]["window_end_ms"] <= drop_ms, actions
    assert out[0]["recommendation"]["reason_code"] == "SATURATED_SCALE_OUT"
    # Falling load: slack, scaled in, but only once no window of the last stabilization window asked
    # for as many replicas (HPA's scale-down stabilization), so never sooner than that after the drop.
    scale_in = [d for d in decisions if d["action"] == "scale_in"]
    assert scale_in and scale_in[0]["recommendation"]["reason_code"] == "SLACK_SCALE_IN", actions
    first_in = scale_in[0]["window_end_ms"]
    assert first_in >= drop_ms + stabilization_ms, actions
    last_held = max(f["window_end_ms"] for f in fronts if f["window_end_ms"] < first_in and _holds_scale_in_back(f))
    assert last_held >= drop_ms, "the windows straddling the drop are still saturated"
    assert first_in - last_held >= stabilization_ms, (last_held, actions)
    assert scale_in[0]["desired_replicas"] < scale_in[0]["previous_desired_replicas"]
    # Until then the slack windows were held as STABILIZING, never scaled in.
    last_out = max(d["window_end_ms"] for d in out if d["window_end_ms"] < first_in)
    between = [d for d in decisions if last_out < d["window_end_ms"] < first_in]
    assert all(d["action"] == "hold" for d in between), actions
    assert "STABILIZING" in {d["reason_code"] for d in between}, actions


def test_no_direction_reverses_inside_a_stabilization_window(decided):
    windows = {"scale_out": POLICY.scaling.scale_up_stabilization_seconds * 1000,
               "scale_in": POLICY.scaling.scale_down_stabilization_seconds * 1000}
    services = {d["service"] for d in decided["scaling_decisions"]}
    assert {"embedder", "llm-inference", "retrieval"} <= services
    for service in services:
        moves = [d for d in _of(decided["scaling_decisions"], service) if d["action"] != "hold"]
        for before, after in zip(moves, moves[1:]):
            if after["action"] != before["action"]:
                assert after["window_end_ms"] - before["window_end_ms"] >= windows[after["action"]], \
                    (service, [(d["window_end_ms"], d["action"]) for d in moves])


def test_current_scaling_answers_through_the_sql_client(decided, tmp_path):
    answer = sql_client(decided["names"], tmp_path,
                        "SELECT service, action, reason_code, desired_replicas, front_points FROM current_scaling "
                        "WHERE service = 'llm-inference';\n")
    assert answer.returncode == 0, answer.stdout[-3000:]
    newest = _of(decided["scaling_decisions"], "llm-inference")[-1]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in answer.stdout.splitlines() if line.startswith("|") and "llm-inference" in line]
    assert [row[:4] for row in rows] == [["llm-inference", newest["action"], newest["reason_code"],
                                          str(newest["desired_replicas"])]], answer.stdout[-3000:]
    assert answer.stdout.count("1 row in set") == 1, answer.stdout[-3000:]


def test_each_scaling_decision_names_the_breaker_decision_as_of_its_window(decided):
    breakers = [b for b in decided["breaker_decisions"] if b["entity"]["kind"] == "service"]
    assert breakers
    by_id = {b["decision_id"]: b for b in breakers}
    for d in decided["scaling_decisions"]:
        before = [b for b in breakers if b["entity"]["key"] == d["entity"]["key"] and b["window_end_ms"] <= d["window_end_ms"]]
        taken = d["coordination"]["decisions"]
        if not before:
            assert taken == [], d
            continue
        newest = max(before, key=lambda b: b["window_end_ms"])
        assert [t["decision_id"] for t in taken] == [newest["decision_id"]], (d["window_end_ms"], taken)
        assert taken[0]["state"] == by_id[taken[0]["decision_id"]]["state"]


def _breakers(records: list[dict], service: str) -> list[dict]:
    return _of([b for b in records if b["entity"]["kind"] == "service"], service)


def test_no_scale_out_while_the_breaker_of_a_failing_service_is_open(decided):
    breakers = _breakers(decided["breaker_decisions"], "reranker")
    assert "OPEN" in {b["state"] for b in breakers}, [(b["window_end_ms"], b["state"]) for b in breakers]
    states = {b["decision_id"]: b["state"] for b in breakers}
    decisions = _of(decided["scaling_decisions"], "reranker")
    actions = [(d["window_end_ms"], d["action"], d["reason_code"], d["recommendation"]["reason_code"]) for d in decisions]
    held = [d for d in decisions if d["reason_code"] == "BREAKER_OPEN"]
    assert held, actions
    for d in held:
        # The front asked for more replicas; 70 % errors is no saturation without errors; the hold (or the
        # revocation of a scale-out made before the breaker opened) names the breaker decision it took
        # into account, one that lets no call through.
        assert d["recommendation"]["reason_code"] == "SATURATED_SCALE_OUT", actions
        assert d["action"] == "hold", actions
        block = d["coordination"]
        assert block["held"] or block["revoked"], d
        if block["held"]:
            assert block["held"]["action"] == "scale_out"
            assert block["held"]["desired_replicas"] > d["desired_replicas"]
        if block["revoked"]:
            assert d["desired_replicas"] == max(d["current_replicas"], block["revoked"]["scaled_out_from"])
        else:
            assert d["desired_replicas"] == d["previous_desired_replicas"], actions
        saturation = block["saturation"]
        assert saturation["without_errors"] is False
        assert saturation["error_rate"] > saturation["max_error_rate"] == POLICY.scaling.saturation_max_error_rate
        causes = {c["decision_id"] for c in (block["held"], block["revoked"]) if c}
        assert len(causes) == 1 and [t["decision_id"] for t in block["decisions"]] == list(causes)
        assert states[causes.pop()] in ("OPEN", "HALF_OPEN", "FORCED_OPEN")
    # The breaker never closes while the service fails: from its first opening on, no scale-out at all.
    opened = min(b["window_end_ms"] for b in breakers if b["state"] == "OPEN")
    assert not [d for d in decisions if d["action"] == "scale_out" and d["window_end_ms"] >= opened], actions


def test_a_scale_out_under_way_is_revoked_when_the_breaker_opens(decided):
    breakers = _breakers(decided["breaker_decisions"], "summarizer")
    opened = [b for b in breakers if b["state"] == "OPEN"]
    assert opened, [(b["window_end_ms"], b["state"]) for b in breakers]
    opened_ms = opened[0]["window_end_ms"]
    decisions = _of(decided["scaling_decisions"], "summarizer")
    actions = [(d["window_end_ms"], d["action"], d["reason_code"], d["current_replicas"], d["desired_replicas"])
               for d in decisions]
    # Slow without errors, it was scaled out before its breaker opened: more replicas recommended than run.
    before = [d for d in decisions if d["window_end_ms"] < opened_ms]
    assert before and before[-1]["desired_replicas"] > before[-1]["current_replicas"], actions
    # In the window its breaker opened, the scale-out not running yet is taken back to what runs, naming
    # the breaker decision; from then on (the breaker never closes: 70 % errors) no recommendation is
    # above the replicas that run.
    after = [d for d in decisions if d["window_end_ms"] >= opened_ms]
    assert after and after[0]["window_end_ms"] == opened_ms, actions
    revoked = after[0]
    assert (revoked["action"], revoked["reason_code"]) == ("hold", "BREAKER_OPEN"), actions
    assert revoked["coordination"]["revoked"]["decision_id"] == opened[0]["decision_id"]
    assert revoked["coordination"]["revoked"]["desired_replicas"] == before[-1]["desired_replicas"]
    started = revoked["coordination"]["revoked"]["scaled_out_from"]
    assert revoked["desired_replicas"] == max(revoked["current_replicas"], started) < before[-1]["desired_replicas"]
    for d in after:
        assert d["action"] != "scale_out" and d["desired_replicas"] <= revoked["desired_replicas"], actions


def test_saturation_without_errors_scales_out_through_an_open_breaker(decided, forced):
    breakers = _breakers(forced["breaker_decisions"], FORCED)
    assert breakers and {b["state"] for b in breakers} == {"FORCED_OPEN"}, [(b["window_end_ms"], b["state"]) for b in breakers]
    assert_valid("stormwatch_scaling_decisions", forced["scaling_decisions"])
    decisions = _of(forced["scaling_decisions"], FORCED)
    out = [d for d in decisions if d["action"] == "scale_out"]
    assert out, [(d["window_end_ms"], d["action"], d["reason_code"]) for d in decisions]
    for d in out:
        assert d["recommendation"]["reason_code"] == "SATURATED_SCALE_OUT"
        assert d["coordination"]["held"] is None
        assert d["coordination"]["saturation"]["without_errors"] is True
        assert [t["state"] for t in d["coordination"]["decisions"]] == ["FORCED_OPEN"]
    assert "BREAKER_OPEN" not in {d["reason_code"] for d in decisions}
    # The open breaker changes nothing of its replicas: the same changes as with its breaker closed.
    changes = [(d["window_end_ms"], d["action"], d["desired_replicas"]) for d in decisions]
    assert changes == [(d["window_end_ms"], d["action"], d["desired_replicas"])
                       for d in _of(decided["scaling_decisions"], FORCED)]
