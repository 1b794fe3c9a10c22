"""Decayed baselines, and how surprising a value is against one: the statistics the root-cause ranker
(stormwatch/suspects.py) and the shape signals (stormwatch/trace_signals.py) share.

A baseline forgets with `decay(factor)` (the ranker's half-life, per data seen), learns with
`absorb`, and judges a new value by its posterior predictive. A *surprise* is -log10 of a tail
probability (3 = "one in a thousand is at least this extreme").

- `RateBaseline`: events per exposure (error origins per span, errors per call answered),
  Gamma-Poisson: the decayed counts on top of a Gamma prior of `shape` around `prior_rate`, judged
  with the negative-binomial predictive, one-sided (at least this many events).
- `StudentTBaseline`: values y = log(1 + ms), a robust Student-t fit: each value enters with the
  weight the t likelihood gives it, (nu + 1) / (nu + z²) (the EM step of a t fit with known nu), so
  a typical value counts fully and one 10 scales out (a fault, or a rare hiccup) a few percent, and
  an ongoing fault hardly moves the baseline. Its scale is shrunk towards `prior_scale`, weighing
  `prior_n` values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import special

# Tail probabilities below this are all "beyond doubt"; it keeps -log10 finite.
TINY_P = 1e-300


def surprise_of(p: float) -> float:
    """-log10 of a tail probability p."""
    return -math.log10(min(1.0, max(float(p), TINY_P)))


@dataclass
class RateBaseline:
    """Decayed event and exposure counts, Gamma-Poisson."""

    events: float = 0.0
    exposure: float = 0.0

    def decay(self, factor: float) -> None:
        self.events *= factor
        self.exposure *= factor

    def posterior(self, prior_rate: float, shape: float) -> tuple[float, float]:
        """(shape, rate) of the posterior Gamma: the prior Gamma(shape, shape / prior_rate) and what was seen."""
        return shape + self.events, shape / prior_rate + self.exposure

    def judge(self, events: float, exposure: float, prior_rate: float, shape: float) -> tuple[float, float]:
        """(expected events, surprise of at least `events`) in `exposure`, under the negative
        binomial predictive of the posterior; no events (or no exposure) are no surprise."""
        r, seen = self.posterior(prior_rate, shape)
        expected = r * exposure / seen
        if events <= 0 or exposure <= 0:
            return expected, 0.0
        # P(K >= k) of NB(r, p = seen / (seen + exposure)) is I_{1-p}(k, r).
        return expected, surprise_of(special.betainc(events, r, exposure / (seen + exposure)))

    def absorb(self, events: float, exposure: float, weight: float) -> None:
        self.events += weight * events
        self.exposure += weight * exposure


@dataclass
class StudentTBaseline:
    """Decayed robust Student-t fit of values y = log(1 + ms) (module docstring)."""

    n: float = 0.0           # values seen (decayed)
    weight: float = 0.0      # their t weights
    sum_wy: float = 0.0
    sum_wrr: float = 0.0
    deviations: float = 0.0  # values seen after the first, which have a residual

    def decay(self, factor: float) -> None:
        self.n *= factor
        self.weight *= factor
        self.sum_wy *= factor
        self.sum_wrr *= factor
        self.deviations *= factor

    def location(self) -> float | None:
        return self.sum_wy / self.weight if self.weight > 0 else None

    def typical_ms(self) -> float | None:
        """The location back in ms; None without a baseline."""
        y = self.location()
        return None if y is None else math.expm1(y)

    def scale(self, prior_scale: float, prior_n: float) -> float:
        return math.sqrt((prior_n * prior_scale**2 + self.sum_wrr) / (prior_n + self.deviations))

    def tail(self, y: float, dof: float, prior_scale: float, prior_n: float) -> float:
        """P(Y >= y) under the predictive; 1 without a baseline."""
        if self.weight <= 0:
            return 1.0
        # The location is itself estimated, from `weight` values' worth.
        s = self.scale(prior_scale, prior_n) * math.sqrt(1 + 1 / max(self.weight, 1e-9))
        return float(special.stdtr(dof, -(y - self.sum_wy / self.weight) / s))

    def absorb(self, y: float, weight: float, dof: float, prior_scale: float, prior_n: float) -> None:
        w = 1.0
        if self.weight > 0:
            r = y - self.sum_wy / self.weight
            w = (dof + 1) / (dof + (r / self.scale(prior_scale, prior_n)) ** 2)
            self.sum_wrr += weight * w * r * r
            self.deviations += weight
        self.n += weight
        self.weight += weight * w
        self.sum_wy += weight * w * y
