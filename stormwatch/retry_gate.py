"""Retry gates per service and edge: how many retries callers may make, how late, and within what budget.

The health score picks a tier (the first whose min_score it reaches); a breaker that lets no regular
call through (OPEN, FORCED_OPEN, HALF_OPEN) allows no retries at all. The delays a gate names are for
callers to draw as in the AWS architecture blog's "Exponential Backoff And Jitter" (none, full,
decorrelated), capped at max_delay_ms. The budget is Finagle's RetryBudget (as Envoy's retry budget and gRPC's retry throttling): retries add
at most budget_ratio of the requests plus a reserve of min_retries_per_second, so even at 100 % failure
retries cannot multiply the load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.breaker import BLOCKING
from stormwatch.validation import positive_number, section_of, share

JITTERS = ("none", "full", "decorrelated")

# Backoff parameter sensitivity (the seed's table): retry settings a policy may have, which are accepted,
# but with a warning naming the risk (backoff_warnings). Constants of the check, not policy keys: they are
# the table's, and a policy able to move them could silence the check on itself.
MIN_BASE_DELAY_MS = 50
MAX_RETRIES = 8


@dataclass(frozen=True)
class RetryTier:
    min_score: float
    max_retries: int
    base_delay_ms: float
    exponential: bool

    @property
    def reason_code(self) -> str:
        return "TIER_" + str(float(self.min_score)).replace(".", "_")


@dataclass(frozen=True)
class RetryPolicy:
    tiers: tuple[RetryTier, ...]
    jitter: str
    max_delay_ms: float
    budget_ratio: float
    min_retries_per_second: float

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RetryPolicy:
        d = section_of(d, "retry", ("tiers", "jitter", "max_delay_ms", "budget_ratio", "min_retries_per_second"))
        if not isinstance(d["tiers"], list) or not d["tiers"]:
            raise ValueError("retry.tiers: expected a non-empty list of tiers")
        tiers = []
        for i, t in enumerate(d["tiers"]):
            where = f"retry.tiers[{i}]"
            t = section_of(t, where, ("min_score", "max_retries", "base_delay_ms", "exponential"))
            if not isinstance(t["exponential"], bool):
                raise ValueError(f"{where}.exponential: expected true or false, got {t['exponential']!r}")
            tiers.append(RetryTier(share(t, "min_score", where),
                                   int(positive_number(t, "max_retries", where, integer=True, allow_zero=True)),
                                   float(positive_number(t, "base_delay_ms", where, allow_zero=True)),
                                   t["exponential"]))
        if any(later.min_score >= earlier.min_score for earlier, later in zip(tiers, tiers[1:])):
            raise ValueError("retry.tiers: min_score must decrease strictly from one tier to the next")
        if tiers[-1].min_score != 0:
            raise ValueError("retry.tiers: the last tier must have min_score 0, so every score has a tier")
        if d["jitter"] not in JITTERS:
            raise ValueError(f"retry.jitter: expected one of {', '.join(JITTERS)}, got {d['jitter']!r}")
        return cls(tuple(tiers), d["jitter"], float(positive_number(d, "max_delay_ms", "retry")),
                   share(d, "budget_ratio", "retry"),
                   float(positive_number(d, "min_retries_per_second", "retry", allow_zero=True)))

    def tier_of(self, score: float) -> int:
        return next(i for i, t in enumerate(self.tiers) if score >= t.min_score)


def backoff_warnings(policy: RetryPolicy) -> list[str]:
    """What in a valid retry policy makes retry storms likely (backoff parameter sensitivity), one line
    per risk naming the key: a tier that retries with a base delay under MIN_BASE_DELAY_MS or with more
    than MAX_RETRIES retries, or no jitter while some tier retries. A tier allowing no retry risks nothing."""
    out = []
    for i, t in enumerate(policy.tiers):
        if t.max_retries == 0:
            continue
        where = f"retry.tiers[{i}]"
        if t.base_delay_ms < MIN_BASE_DELAY_MS:
            out.append(f"{where}.base_delay_ms = {t.base_delay_ms:g} is under {MIN_BASE_DELAY_MS} ms: retries come "
                       f"back before a struggling callee can recover and pile onto it (retry storm)")
        if t.max_retries > MAX_RETRIES:
            out.append(f"{where}.max_retries = {t.max_retries} is more than {MAX_RETRIES}: one failing call may "
                       f"become {t.max_retries + 1} on the callee, multiplied again at every retrying caller "
                       f"above it (retry amplification)")
    if policy.jitter == "none" and any(t.max_retries > 0 for t in policy.tiers):
        out.append("retry.jitter = none: callers that failed together retry together, in synchronized waves "
                   "(thundering herd)")
    return out


@dataclass(frozen=True)
class RetryGate:
    max_retries: int
    base_delay_ms: float
    exponential: bool
    jitter: str
    max_delay_ms: float
    budget_retries: int
    breaker_state: str | None
    reason_code: str        # TIER_<min_score>, BREAKER_<state>, RETRY_STORM (entity_control) or INSUFFICIENT_DATA
    tier: int


def gate(score: float | None, breaker_state_name: str | None, requests: int, window_seconds: float,
         policy: RetryPolicy, previous_tier: int | None = None) -> RetryGate:
    """The gate for the next window. Without a score (too few calls) the previous tier stays; an entity
    never scored gets the most cautious tier that still allows a retry, as a single failure at low
    traffic must stay retryable (the budget's reserve bounds it)."""
    if score is not None:
        tier = policy.tier_of(score)
        reason = policy.tiers[tier].reason_code
    else:
        retrying = [i for i, t in enumerate(policy.tiers) if t.max_retries > 0]
        tier = previous_tier if previous_tier is not None else (retrying[-1] if retrying else len(policy.tiers) - 1)
        tier = min(tier, len(policy.tiers) - 1)   # a policy update may have removed tiers
        reason = "INSUFFICIENT_DATA"
    chosen = policy.tiers[tier]
    max_retries = chosen.max_retries
    if breaker_state_name in BLOCKING:
        max_retries, reason = 0, f"BREAKER_{breaker_state_name}"
    budget = math.floor(policy.budget_ratio * requests + policy.min_retries_per_second * window_seconds)
    return RetryGate(max_retries, chosen.base_delay_ms, chosen.exponential, policy.jitter, policy.max_delay_ms,
                     budget, breaker_state_name, reason, tier)
