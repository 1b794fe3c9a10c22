import json

from stormwatch.config import PROJECT_ROOT
from stormwatch.decisions import encode
from stormwatch.entity_control import EntityState, observe
from stormwatch.health import HealthInputs
from stormwatch.policy import load
from tests.schemas import assert_valid

POLICY = load(PROJECT_ROOT / "config" / "policy.toml")
TOPICS = {"health": "stormwatch_health", "breaker": "stormwatch_breaker_decisions",
          "retry_gate": "stormwatch_retry_decisions"}
START = 1_767_225_600_000


def window(i: int, calls: int, errors: int, kind="service", p95=120.0) -> HealthInputs:
    end = START + 30_000 + i * 10_000
    names = {"service": dict(entity_key="service:cart", service="cart", instance=None, caller=None, callee=None),
             "edge": dict(entity_key="edge:frontend->cart", service=None, instance=None, caller="frontend",
                          callee="cart"),
             "instance": dict(entity_key="instance:cart/cart-1", service="cart", instance="cart-1", caller=None,
                              callee=None)}[kind]
    return HealthInputs(entity_kind=kind, **names, window_start_ms=end - 30_000, window_end_ms=end, calls=calls,
                        errors=errors, p50_ms=40.0, p95_ms=p95 if calls else None, p99_ms=p95 * 1.5 if calls else None,
                        load_ratio=0.5 if kind != "edge" else None,
                        example_trace_ids=["4bf92f3577b34da6a3ce929d0e0e4736"] if calls else [])


def storm() -> list[HealthInputs]:
    """Healthy, then errors jump, then nothing gets through while open, then probes, then a calm ramp."""
    healthy = [window(i, 200, 2) for i in range(6)]
    jump = [window(6, 200, 160, p95=1900.0)]
    rejected = [window(i, 0, 0) for i in range(7, 10)]
    probes = [window(10, 20, 0)]
    ramp = [window(i, 200, 1) for i in range(11, 11 + 19 * 3 + 1)]
    return healthy + jump + rejected + probes + ramp


def run(inputs: list[HealthInputs]) -> list[dict]:
    state, out = None, []
    for i in inputs:
        state, decisions = observe(state, i, POLICY)
        out.extend(decisions)
    return out


def of_type(decisions, decision_type):
    return [d for d in decisions if d["decision_type"] == decision_type]


def test_storm_opens_within_the_window_of_the_jump_and_recovers_through_the_ramp():
    decisions = run(storm())
    breaker = of_type(decisions, "breaker")
    assert breaker[0]["state"] == "OPEN" and breaker[0]["window_end_ms"] == window(6, 0, 0).window_end_ms
    assert breaker[0]["reason_code"] in ("SCORE_BELOW_OPEN_THRESHOLD", "FAILURE_RATE_ABOVE_THRESHOLD")
    assert [b["state"] for b in breaker[:3]] == ["OPEN", "HALF_OPEN", "GRADUAL_RECOVERY"]
    assert breaker[1]["max_probes"] == POLICY.breaker.max_probes
    ramp = [b for b in breaker[2:] if b["state"] == "GRADUAL_RECOVERY"]
    assert [b["admitted_share"] for b in ramp][:3] == [0.05, 0.1, 0.15]
    assert breaker[-1]["state"] == "CLOSED" and breaker[-1]["reason_code"] == "RAMP_COMPLETE"
    assert len(breaker) == 3 + 19 and all(b["enforced"] for b in breaker)
    assert [b["sequence"] for b in breaker] == list(range(1, len(breaker) + 1))


def test_retry_gates_close_while_the_breaker_blocks_and_reopen_after():
    gates = of_type(run(storm()), "retry_gate")
    assert gates[0]["reason_code"] == "TIER_0_8" and gates[0]["previous"] is None and gates[0]["max_retries"] == 3
    blocked = next(g for g in gates if g["max_retries"] == 0)
    assert blocked["reason_code"] == "BREAKER_OPEN" and blocked["previous"]["max_retries"] == 3
    assert gates[-1]["max_retries"] == 3 and gates[-1]["breaker_state"] == "GRADUAL_RECOVERY"
    assert all(a["max_retries"] != b["max_retries"] or a["reason_code"] != b["reason_code"] or
               a["base_delay_ms"] != b["base_delay_ms"] for a, b in zip(gates, gates[1:]))


def test_a_health_record_every_window_with_insufficient_data_while_nothing_gets_through():
    inputs = storm()
    health = of_type(run(inputs), "health")
    assert len(health) == len(inputs)
    assert [h["sequence"] for h in health] == list(range(1, len(inputs) + 1))
    assert health[0]["status"] == "OK" and health[0]["score"] > 0.8
    assert health[7]["status"] == "INSUFFICIENT_DATA" and health[7]["score"] is None
    assert health[0]["entity"] == {"kind": "service", "key": "service:cart", "service": "cart"}


def test_instances_get_health_only():
    decisions = run([window(i, 200, 190, kind="instance") for i in range(5)])
    assert {d["decision_type"] for d in decisions} == {"health"}
    assert decisions[0]["entity"] == {"kind": "instance", "key": "instance:cart/cart-1", "service": "cart",
                                      "instance": "cart-1"}


def test_edges_get_breakers_without_load():
    decisions = run([window(0, 200, 2, kind="edge"), window(1, 200, 190, kind="edge")])
    assert of_type(decisions, "breaker")[0]["entity"]["caller"] == "frontend"
    assert of_type(decisions, "health")[0]["weights"] == {"latency": 0.5, "errors": 0.5}


def test_every_decision_validates_against_its_schema():
    decisions = run(storm()) + run([window(i, 200, 190, kind="instance") for i in range(3)]) + run(
        [window(0, 5, 0, kind="edge"), window(1, 200, 190, kind="edge")])
    for decision_type, topic in TOPICS.items():
        records = of_type(decisions, decision_type)
        assert records
        assert_valid(topic, records)


def test_same_input_gives_identical_bytes():
    first = [encode(d) for d in run(storm())]
    assert first == [encode(d) for d in run(storm())]
    assert len({json.loads(d)["decision_id"] for d in first}) == len(first)


def test_state_survives_as_returned():
    state, _ = observe(None, window(0, 200, 2), POLICY)
    assert isinstance(state, EntityState) and state.sequences == {"health": 1, "retry_gate": 1}
    state, decisions = observe(state, window(1, 200, 2), POLICY)
    assert [d["decision_type"] for d in decisions] == ["health"] and state.sequences["health"] == 2


def test_a_service_health_record_names_its_breaker_as_of_the_window():
    decisions = run(storm())
    health = of_type(decisions, "health")
    breakers = of_type(decisions, "breaker")
    assert breakers
    for h in health:
        before = [b for b in breakers if b["window_end_ms"] <= h["window_end_ms"]]
        if not before:
            assert h["breaker"] is None
            continue
        newest = before[-1]
        assert h["breaker"] == {"decision_id": newest["decision_id"], "state": newest["state"],
                                "window_end_ms": newest["window_end_ms"], "enforced": newest["enforced"]}
    instance = run([window(i, 200, 190, kind="instance") for i in range(2)])
    assert not [d for d in instance if "breaker" in d]
