import pytest

from stormwatch.health import HealthInputs, HealthPolicy, score

POLICY = {"window_size_seconds": 30, "window_slide_seconds": 10, "min_calls": 20,
          "weights": {"latency": 0.4, "errors": 0.4, "load": 0.2}, "latency_cap_ms": 2000.0}


def inputs(**kw) -> HealthInputs:
    base = dict(entity_kind="service", entity_key="service:a", service="a", instance=None, caller=None,
                callee=None, window_start_ms=0, window_end_ms=30_000, calls=100, errors=0,
                p50_ms=10.0, p95_ms=100.0, p99_ms=200.0, load_ratio=0.5, example_trace_ids=[])
    return HealthInputs(**{**base, **kw})


def test_score_is_the_weighted_sum_of_the_terms():
    s = score(inputs(errors=10, p95_ms=500.0, load_ratio=0.5), HealthPolicy.from_dict(POLICY))
    assert s.status == "OK"
    assert s.error_rate == pytest.approx(0.1)
    assert s.terms == pytest.approx({"latency": 0.75, "errors": 0.9, "load": 0.5})
    assert s.score == pytest.approx(0.4 * 0.75 + 0.4 * 0.9 + 0.2 * 0.5)


def test_latency_above_the_cap_and_load_above_one_count_as_zero():
    s = score(inputs(p95_ms=9000.0, load_ratio=3.0), HealthPolicy.from_dict(POLICY))
    assert s.terms["latency"] == 0.0 and s.terms["load"] == 0.0
    assert s.score == pytest.approx(0.4)


def test_missing_load_renormalises_the_weights():
    s = score(inputs(load_ratio=None, errors=0, p95_ms=0.0), HealthPolicy.from_dict(POLICY))
    assert s.weights == pytest.approx({"latency": 0.5, "errors": 0.5})
    assert s.score == pytest.approx(1.0)
    s = score(inputs(load_ratio=None, errors=100, p95_ms=0.0), HealthPolicy.from_dict(POLICY))
    assert s.score == pytest.approx(0.5)


def test_missing_p95_drops_the_latency_term():
    s = score(inputs(p95_ms=None, load_ratio=None, errors=50), HealthPolicy.from_dict(POLICY))
    assert s.weights == {"errors": 1.0}
    assert s.score == pytest.approx(0.5)


def test_too_few_calls_is_insufficient_data():
    s = score(inputs(calls=19, errors=19), HealthPolicy.from_dict(POLICY))
    assert s.status == "INSUFFICIENT_DATA" and s.score is None and s.error_rate == 1.0
    assert score(inputs(calls=0, errors=0), HealthPolicy.from_dict(POLICY)).error_rate is None


@pytest.mark.parametrize("change, key", [
    ({"min_calls": 0}, "health.min_calls"),
    ({"min_calls": 2.5}, "health.min_calls"),
    ({"latency_cap_ms": -1}, "health.latency_cap_ms"),
    ({"window_slide_seconds": 60}, "health.window_slide_seconds"),
    ({"weights": {"latency": 1, "errors": 1}}, "health.weights.load"),
    ({"weights": {"latency": 0, "errors": 0, "load": 0}}, "health.weights"),
    ({"weights": {"latency": -1, "errors": 1, "load": 1}}, "health.weights.latency"),
    ({"latency_cap": 1}, "health.latency_cap"),
])
def test_invalid_policy_names_the_key(change, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        HealthPolicy.from_dict({**POLICY, **change})


def test_unknown_entity_kind_is_rejected():
    with pytest.raises(ValueError, match="entity_kind"):
        inputs(entity_kind="pod")
