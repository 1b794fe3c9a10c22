import json
import tomllib

import pytest

from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import PolicyError, apply_update, from_document, load, warning_reason, warnings

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


# Backoff parameter sensitivity (issue 21 item 4): risky retry settings are accepted with a warning.
def _with_retry(**change) -> dict:
    return {**DOC, "version": "risky", "retry": {**DOC["retry"], **change}}


def _tiers(**change) -> list[dict]:
    """The default tiers with the first (the one that retries most) changed."""
    return [{**DOC["retry"]["tiers"][0], **change}, *DOC["retry"]["tiers"][1:]]


def test_the_default_policy_has_no_warnings():
    assert warnings(load(PATH)) == []


@pytest.mark.parametrize("change, key, risk", [
    ({"tiers": _tiers(base_delay_ms=10)}, "retry.tiers[0].base_delay_ms = 10", "under 50 ms"),
    ({"tiers": _tiers(max_retries=9)}, "retry.tiers[0].max_retries = 9", "more than 8"),
    ({"jitter": "none"}, "retry.jitter = none", "synchronized waves"),
])
def test_a_risky_retry_setting_is_accepted_with_a_warning_naming_the_key_and_the_risk(change, key, risk):
    new, error = apply_update(load(PATH), json.dumps(_with_retry(**change)))
    assert error is None and new.version == "risky"
    (line,) = warnings(new)
    assert line.startswith(key) and risk in line
    reason = warning_reason(warnings(new))
    assert reason.startswith("policy accepted with warnings (backoff parameter sensitivity): ") and key in reason


def test_the_limits_themselves_and_tiers_without_retries_are_no_risk():
    at_limits = _with_retry(tiers=_tiers(base_delay_ms=50, max_retries=8))
    assert warnings(from_document(at_limits)) == []
    # The last tier allows no retry: its 0 ms delay risks nothing; nor does `none` jitter without retries.
    no_retries = [{**t, "max_retries": 0, "base_delay_ms": 0} for t in DOC["retry"]["tiers"]]
    assert warnings(from_document(_with_retry(tiers=no_retries, jitter="none"))) == []


def test_every_risk_of_a_policy_is_named():
    lines = warnings(from_document(_with_retry(tiers=_tiers(base_delay_ms=1, max_retries=20), jitter="none")))
    assert [line.split(" ")[0] for line in lines] == ["retry.tiers[0].base_delay_ms", "retry.tiers[0].max_retries",
                                                     "retry.jitter"]


def test_an_old_policy_without_the_coordination_key_still_loads():
    old = {**DOC, "scaling": {k: v for k, v in DOC["scaling"].items() if k != "saturation_max_error_rate"}}
    assert from_document(old).scaling.saturation_max_error_rate == 0.05
