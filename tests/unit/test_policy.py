import json
import tomllib

import pytest

from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import PolicyError, apply_update, from_document, load

PATH = PROJECT_ROOT / "config" / "policy.toml"
DOC = tomllib.loads(PATH.read_text())


def test_the_default_policy_loads():
    policy = load(PATH)
    assert policy.name == "default" and policy.health.min_calls == DOC["health"]["min_calls"]
    assert policy.breaker.overrides == {} and policy.retry.tiers[0].max_retries == 3
    assert policy.raw["scaling"] == DOC["scaling"]
    assert policy.pareto.latency_quantile == DOC["pareto"]["latency_quantile"]
    assert policy.scaling.slo_for("any") == DOC["scaling"]["slo_ms"]["default"]


def test_a_valid_update_replaces_the_policy():
    current = load(PATH)
    doc = {**DOC, "version": "v2", "breaker": {**DOC["breaker"], "overrides": {"service:a": "FORCED_OPEN"}}}
    new, error = apply_update(current, json.dumps(doc))
    assert error is None and new.version == "v2" and new.breaker.overrides == {"service:a": "FORCED_OPEN"}


def test_a_valid_scaling_update_takes_effect():
    current = load(PATH)
    doc = {**DOC, "version": "v3", "scaling": {**DOC["scaling"], "slo_ms": {"default": 500.0, "llm": 9000.0}}}
    new, error = apply_update(current, json.dumps(doc))
    assert error is None and (new.scaling.slo_for("llm"), new.scaling.slo_for("gateway")) == (9000.0, 500.0)


@pytest.mark.parametrize("document, message", [
    ("{not json", "not JSON"),
    (json.dumps([1]), "must be an object"),
    (json.dumps({**DOC, "version": ""}), "version"),
    (json.dumps({k: v for k, v in DOC.items() if k != "retry"}), "retry: missing"),
    (json.dumps({**DOC, "breaker": {**DOC["breaker"], "min_calls": -3}}), "breaker.min_calls"),
    (json.dumps({**DOC, "health": {**DOC["health"], "weights": {"latency": 1}}}), "health.weights"),
    (json.dumps({**DOC, "name": "other"}), "name"),
    (json.dumps({k: v for k, v in DOC.items() if k != "scaling"}), "scaling: missing"),
    (json.dumps({**DOC, "scaling": {**DOC["scaling"], "max_replicas": 0}}), "scaling.max_replicas"),
    (json.dumps({**DOC, "scaling": {**DOC["scaling"], "slo_ms": {"llm": 500}}}), "scaling.slo_ms"),
    (json.dumps({**DOC, "scaling": {**DOC["scaling"], "scale_up_limit": {"percent": 100, "pods": 4}}}),
     "scaling.scale_up_limit.period_seconds"),
    (json.dumps({**DOC, "pareto": {**DOC["pareto"], "latency_quantile": "p50"}}), "pareto.latency_quantile"),
])
def test_an_invalid_update_is_rejected_and_the_previous_stays(document, message):
    current = load(PATH)
    kept, error = apply_update(current, document)
    assert kept is current and message in error


@pytest.mark.parametrize("key", ["window_size_seconds", "window_slide_seconds"])
def test_changing_the_windows_is_rejected(key):
    current = load(PATH)
    doc = {**DOC, "health": {**DOC["health"], key: DOC["health"][key] * 2 if key == "window_size_seconds" else 5}}
    kept, error = apply_update(current, json.dumps(doc))
    assert kept is current and f"health.{key}" in error and "fixed when the job starts" in error


def test_from_document_raises_policy_error():
    with pytest.raises(PolicyError, match="health.latency_cap_ms"):
        from_document({**DOC, "health": {**DOC["health"], "latency_cap_ms": 0}})
