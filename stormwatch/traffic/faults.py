"""What changes the generated traffic: background error rates, propagation, network delay and callers'
retries (`Params`); `Fault`s such as `FaultWindow` that make a service or one instance slower, failing
or short of capacity for traces starting in a window of event time; and a `LoadShape` of the arrival
rate over time. stormwatch/traffic/schedule.py reads them from a fault schedule file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


def _check_probability(what: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{what} must be in [0, 1], got {value}")


@dataclass(frozen=True)
class Params:
    """Error rates and network delay; latencies and capacities live in the topology."""

    # Chance that a SERVER span (or an external call) fails by itself, per service unless overridden.
    error_rate: float = 0.005
    service_error_rates: Mapping[str, float] = field(default_factory=dict)
    # Chance that a caller fails when a call fails; otherwise it catches the error and carries on.
    propagation: float = 0.85
    # One-way delay between a CLIENT span and its SERVER span, each way: lognormal around network_ms.
    network_ms: float = 0.3
    network_sigma: float = 0.5
    # How often a caller tries a failed call again (caller name -> retries): each retry is a real call,
    # so a failing callee sees its load multiplied, a retry storm. Retry n waits a full-jitter
    # exponential backoff first: uniform in [0, retry_backoff_ms * 2^(n - 1)].
    retries: Mapping[str, int] = field(default_factory=dict)
    retry_backoff_ms: float = 50.0

    def __post_init__(self) -> None:
        _check_probability("error_rate", self.error_rate)
        _check_probability("propagation", self.propagation)
        for name, rate in self.service_error_rates.items():
            _check_probability(f"service_error_rates[{name!r}]", rate)
        if any(n < 0 for n in self.retries.values()) or self.retry_backoff_ms < 0:
            raise ValueError(f"retries and retry_backoff_ms must not be negative: {self.retries}, {self.retry_backoff_ms}")


@dataclass(frozen=True)
class FaultEffect:
    latency_factor: float = 1.0
    error_rate: float = 0.0
    delay_ms: float = 0.0  # added to the service's own time of each request
    capacity_factor: float = 1.0


NO_EFFECT = FaultEffect()


class Fault(Protocol):
    """Something that changes a service's spans in traces that start `elapsed_s` after the generator's start.

    `instance` is None for an external dependency, which has no instances.
    """

    def effect(self, service: str, instance: str | None, elapsed_s: float) -> FaultEffect: ...


@dataclass(frozen=True, kw_only=True)
class FaultWindow:
    """Changes `service` (or only its `instance`) for traces starting in [start_s, end_s): slower by
    `latency_factor`, `delay_ms` more of its own time per request (a latency spike), failing at
    `error_rate` more (an error burst), `capacity_factor` of its capacity (a slow instance). After
    end_s it is back to normal: what remains is the backlog its queues still hold."""

    service: str
    instance: str | None = None
    start_s: float
    end_s: float
    latency_factor: float = 1.0
    error_rate: float = 0.0
    delay_ms: float = 0.0
    capacity_factor: float = 1.0

    def __post_init__(self) -> None:
        if self.end_s <= self.start_s:
            raise ValueError(f"FaultWindow: end_s {self.end_s} is not after start_s {self.start_s}")
        if self.latency_factor <= 0 or self.capacity_factor <= 0:
            raise ValueError(f"FaultWindow: latency_factor and capacity_factor must be positive: {self}")
        if self.delay_ms < 0:
            raise ValueError(f"FaultWindow: delay_ms must not be negative, got {self.delay_ms}")
        _check_probability("FaultWindow.error_rate", self.error_rate)

    def effect(self, service: str, instance: str | None, elapsed_s: float) -> FaultEffect:
        hit = (
            service == self.service
            and self.instance in (None, instance)
            and self.start_s <= elapsed_s < self.end_s
        )
        if not hit:
            return NO_EFFECT
        return FaultEffect(self.latency_factor, self.error_rate, self.delay_ms, self.capacity_factor)


@dataclass(frozen=True)
class LoadShape:
    """A multiplier of the arrival rate over event time: piecewise linear through (elapsed_s, factor)
    points, the first factor before the first point and the last after the last."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("LoadShape: no points")
        times = [t for t, _ in self.points]
        if times != sorted(times):
            raise ValueError(f"LoadShape: times must ascend, got {times}")
        if any(f <= 0 for _, f in self.points):
            raise ValueError(f"LoadShape: factors must be positive, got {[f for _, f in self.points]}")

    def factor(self, elapsed_s: float) -> float:
        (t0, f0), rest = self.points[0], self.points[1:]
        if elapsed_s <= t0:
            return f0
        for t1, f1 in rest:
            if elapsed_s < t1:
                return f0 + (f1 - f0) * (elapsed_s - t0) / (t1 - t0)
            t0, f0 = t1, f1
        return f0
