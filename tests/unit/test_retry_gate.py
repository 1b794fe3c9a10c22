import tomllib

import pytest

from stormwatch.config import PROJECT_ROOT
from stormwatch.retry_gate import RetryPolicy, gate

DOC = tomllib.loads((PROJECT_ROOT / "config" / "policy.toml").read_text())["retry"]
POLICY = RetryPolicy.from_dict(DOC)


@pytest.mark.parametrize("score, retries, reason, tier", [
    (1.0, 3, "TIER_0_8", 0), (0.8, 3, "TIER_0_8", 0), (0.79, 2, "TIER_0_6", 1),
    (0.3, 1, "TIER_0_3", 2), (0.1, 0, "TIER_0_0", 3),
])
def test_the_score_picks_the_first_tier_it_reaches(score, retries, reason, tier):
    g = gate(score, "CLOSED", 100, 30, POLICY)
    assert (g.max_retries, g.reason_code, g.tier) == (retries, reason, tier)


@pytest.mark.parametrize("state", ["OPEN", "FORCED_OPEN", "HALF_OPEN"])
def test_no_retries_while_the_breaker_blocks(state):
    g = gate(0.95, state, 100, 30, POLICY)
    assert (g.max_retries, g.reason_code, g.breaker_state) == (0, f"BREAKER_{state}", state)


def test_recovering_breaker_keeps_the_tier():
    assert gate(0.95, "GRADUAL_RECOVERY", 100, 30, POLICY).max_retries == 3


def test_without_a_score_the_previous_tier_stays():
    g = gate(None, "CLOSED", 5, 30, POLICY, previous_tier=1)
    assert (g.tier, g.max_retries, g.reason_code) == (1, 2, "INSUFFICIENT_DATA")
    first = gate(None, "CLOSED", 5, 30, POLICY)
    assert (first.tier, first.max_retries) == (2, 1)      # cautious, but still one retry


def test_budget_is_the_ratio_of_requests_plus_the_reserve():
    assert gate(0.9, "CLOSED", 1000, 30, POLICY).budget_retries == 200 + 150
    assert gate(0.9, "CLOSED", 7, 10, POLICY).budget_retries == 51


def test_at_100_percent_failure_the_budget_is_the_ratio_plus_the_reserve():
    tiers = [{"min_score": 0.0, "max_retries": 3, "base_delay_ms": 0, "exponential": False}]
    pol = RetryPolicy.from_dict({**DOC, "tiers": tiers, "budget_ratio": 0.2, "min_retries_per_second": 5.0})
    # By hand: budget_ratio · requests + min_retries_per_second · window = 0.2 · 3000 + 5 · 30,
    # well below the 3 × requests retries every failing call would otherwise make.
    assert gate(0.0, "CLOSED", 3000, 30, pol).budget_retries == 750


@pytest.mark.parametrize("change, key", [
    ({"jitter": "some"}, "retry.jitter"),
    ({"budget_ratio": 2}, "retry.budget_ratio"),
    ({"tiers": []}, "retry.tiers"),
    ({"tiers": [{"min_score": 0.5, "max_retries": 1, "base_delay_ms": 1, "exponential": False}]}, "retry.tiers"),
    ({"tiers": [{"min_score": 0.0, "max_retries": -1, "base_delay_ms": 1, "exponential": False}]},
     r"retry.tiers\[0\].max_retries"),
    ({"tiers": [{"min_score": 0.0, "max_retries": 1, "base_delay_ms": 1}]}, r"retry.tiers\[0\].exponential"),
    ({"tiers": [{"min_score": 0.0, "max_retries": 1, "base_delay_ms": 1, "exponential": False}] * 2}, "retry.tiers"),
])
def test_invalid_policy_names_the_key(change, key):
    with pytest.raises(ValueError, match=key):
        RetryPolicy.from_dict({**DOC, **change})
