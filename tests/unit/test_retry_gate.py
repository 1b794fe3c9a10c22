import random
import tomllib

import pytest

from stormwatch.config import PROJECT_ROOT
from stormwatch.retry_gate import RetryBudget, RetryPolicy, delays, gate

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


def test_no_jitter_is_the_backoff_itself_capped():
    g = gate(0.7, "CLOSED", 100, 30, RetryPolicy.from_dict({**DOC, "jitter": "none", "max_delay_ms": 300}))
    assert delays(g, 5, random.Random(1)) == [200, 300]     # exponential 200, 400 -> capped; max_retries 2
    g = gate(0.9, "CLOSED", 100, 30, RetryPolicy.from_dict({**DOC, "jitter": "none"}))
    assert delays(g, 3, random.Random(1)) == [50, 50, 50]


@pytest.mark.parametrize("jitter", ["full", "decorrelated"])
def test_jittered_delays_stay_within_bounds(jitter):
    tiers = [{"min_score": 0.0, "max_retries": 10, "base_delay_ms": 100, "exponential": True}]
    pol = RetryPolicy.from_dict({**DOC, "tiers": tiers, "jitter": jitter, "max_delay_ms": 5000})
    g = gate(0.5, "CLOSED", 100, 30, pol)
    rng = random.Random(7)
    for _ in range(200):
        ds = delays(g, 10, rng)
        assert len(ds) == 10 and all(0 <= d <= 5000 for d in ds)
        if jitter == "full":
            assert all(d <= 100 * 2 ** i for i, d in enumerate(ds))
        else:
            assert all(d >= 100 for d in ds)
            assert all(b <= max(3 * a, 100) for a, b in zip(ds, ds[1:]))


def test_at_100_percent_failure_retries_stay_within_the_budget():
    tiers = [{"min_score": 0.0, "max_retries": 3, "base_delay_ms": 0, "exponential": False}]
    pol = RetryPolicy.from_dict({**DOC, "tiers": tiers, "budget_ratio": 0.2, "min_retries_per_second": 5.0})
    window_s, requests = 30, 3000
    budget = RetryBudget(pol, start_s=0.0)
    retries = 0
    for i in range(requests):
        now = i * window_s / requests
        budget.deposit()
        for _ in range(3):                   # every call fails: retry as often as allowed
            if not budget.withdraw(now):
                break
            retries += 1
    # By hand: budget_ratio · requests + min_retries_per_second · window = 0.2 · 3000 + 5 · 30.
    bound = 750
    assert retries <= bound
    assert retries >= 0.99 * bound           # the budget is used, not just respected
    assert gate(0.0, "CLOSED", requests, window_s, pol).budget_retries == bound   # and the gate says so
    assert retries < requests                # without it: 3 × requests


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
