"""Per-instance request metrics of generated traffic, consistent with its spans.

Every interval of `interval_s` (aligned to multiples of it since the epoch; the first one starts with
the generator) each instance reports what its SERVER spans ending in the interval add up to: requests,
errors, a latency histogram and quantiles; and what spans do not show: the most requests in flight at
once, its concurrency limit, its capacity and how busy its workers were. Two encodings of the same
numbers:

- `InstanceInterval.record()`: the native record, schemas/stormwatch_instance_metrics.schema.json
  (what the health job reads from stormwatch_instance_metrics).
- `otlp_metrics_request(intervals)`: an OTLP ExportMetricsServiceRequest as the Collector's kafka
  exporter writes it to otlp_metrics (otlp_json), one resource per instance, delta temporality:

  | native field                             | OTLP metric (unit)                                              |
  |------------------------------------------|-----------------------------------------------------------------|
  | requests, errors, latency histogram      | `http.server.request.duration` (s) for HTTP services, `rpc.server.call.duration` (s) for gRPC: histogram data points, one without `error.type` (successes) and one per `error.type` value (errors), bounds in seconds |
  | in_flight                                | `stormwatch.server.active_requests.max` ({request}), gauge      |
  | concurrency_limit                        | `stormwatch.server.concurrency_limit` ({request}), gauge        |
  | capacity_rps                             | `stormwatch.server.capacity` ({request}/s), gauge               |
  | cpu_utilization                          | `process.cpu.utilization` (1), gauge                            |

  The duration histograms and `process.cpu.utilization` are OpenTelemetry semantic conventions; the
  semantic conventions have nothing for the other three, hence the `stormwatch.` names. Quantiles are
  not sent: a reader takes them from the histogram.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from connectors.otlp import attributes_json, resource_json
from stormwatch.traffic import SCOPE

# OTLP AggregationTemporality: each data point covers its own interval only.
AGGREGATION_TEMPORALITY_DELTA = 1


@dataclass(frozen=True)
class MetricsSettings:
    interval_s: float
    bounds_ms: tuple[float, ...]
    # Which of the two latency forms records carry (at least one).
    histogram: bool = True
    quantiles: bool = True

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ValueError(f"metrics interval must be positive, got {self.interval_s}")
        if not self.bounds_ms or any(b <= a for a, b in zip(self.bounds_ms, self.bounds_ms[1:])):
            raise ValueError(f"latency bucket bounds must be given and ascend, got {self.bounds_ms}")
        if not (self.histogram or self.quantiles):
            raise ValueError("metrics need the histogram, the quantiles or both")


@dataclass(frozen=True)
class InstanceInfo:
    service: str
    instance: str
    transport: str  # "http" | "grpc"
    operation: str
    workers: int
    max_queue_ms: float


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def bucket_counts(bounds: Sequence[float], values: Iterable[float]) -> list[int]:
    """Per-bucket counts, OTLP explicit-bucket semantics: bucket i counts (bounds[i-1], bounds[i]]."""
    counts = [0] * (len(bounds) + 1)
    for value in values:
        counts[bisect_left(bounds, value)] += 1
    return counts


@dataclass(frozen=True)
class InstanceInterval:
    info: InstanceInfo
    settings: MetricsSettings
    start_unix_nano: int
    end_unix_nano: int
    # Every SERVER span of the instance that ended in [start, end): (duration ms, error.type or None).
    latencies: tuple[tuple[float, str | None], ...]
    in_flight: int
    capacity_rps: float
    cpu_utilization: float

    @property
    def requests(self) -> int:
        return len(self.latencies)

    @property
    def errors(self) -> int:
        return sum(error is not None for _, error in self.latencies)

    @property
    def concurrency_limit(self) -> int:
        """The most requests the instance holds at once: its workers plus the queue it admits."""
        return self.info.workers + math.floor(self.capacity_rps * self.info.max_queue_ms / 1000)

    def record(self) -> dict:
        """The stormwatch_instance_metrics record: every field, null where the form is not carried."""
        bounds = list(map(float, self.settings.bounds_ms))
        latencies = sorted(ms for ms, _ in self.latencies)
        counts = bucket_counts(bounds, latencies) if self.settings.histogram else None
        quantiles = {
            name: round(quantile(latencies, q), 3) if self.settings.quantiles and latencies else None
            for name, q in (("latency_p50_ms", 0.5), ("latency_p95_ms", 0.95), ("latency_p99_ms", 0.99))
        }
        return {
            "start_time_unix_nano": self.start_unix_nano,
            "time_unix_nano": self.end_unix_nano,
            "service_name": self.info.service,
            "service_instance_id": self.info.instance,
            "requests": self.requests,
            "errors": self.errors,
            "latency_bucket_bounds_ms": bounds if self.settings.histogram else None,
            "latency_bucket_counts": counts,
            **quantiles,
            "in_flight": self.in_flight,
            "concurrency_limit": self.concurrency_limit,
            "capacity_rps": round(self.capacity_rps, 3),
            "cpu_utilization": round(self.cpu_utilization, 4),
        }

    @property
    def key(self) -> dict:
        """The Kafka key of its record: the instance."""
        return {"service_name": self.info.service, "service_instance_id": self.info.instance}


@dataclass
class _Pending:
    # (start, end, duration ms, error.type) of SERVER spans, and (begin, end) of worker busy times,
    # that have not ended before the next interval to report.
    requests: list[tuple[int, int, float, str | None]] = field(default_factory=list)
    work: list[tuple[int, int]] = field(default_factory=list)


class MetricsRecorder:
    """Collects requests and worker busy times per instance; reports closed intervals.

    `capacity(service, instance, elapsed_s)` is the instance's capacity at a time of the run, its
    faults included: the figure reported is the one at the interval's start.
    """

    def __init__(self, settings: MetricsSettings, start_unix_nano: int, instances: Iterable[InstanceInfo],
                 capacity: Callable[[str, str, float], float]) -> None:
        self.settings = settings
        self.start_unix_nano = start_unix_nano
        self._infos = {info.instance: info for info in instances}
        self._capacity = capacity
        self._pending = {name: _Pending() for name in self._infos}
        self._interval_ns = round(settings.interval_s * 1e9)
        self._next_start = start_unix_nano

    def request(self, instance: str, start: int, end: int, error_type: str | None) -> None:
        self._pending[instance].requests.append((start, end, (end - start) / 1e6, error_type))

    def work(self, instance: str, begin: int, end: int) -> None:
        self._pending[instance].work.append((begin, end))

    def _end_of(self, start: int) -> int:
        return (start // self._interval_ns + 1) * self._interval_ns

    def closed(self, until_unix_nano: int) -> list[InstanceInterval]:
        """Every interval ending at or before `until_unix_nano` not reported yet; the caller knows that no
        request still to be recorded ends before it."""
        out = []
        while self._end_of(self._next_start) <= until_unix_nano:
            out += self._report(self._next_start, self._end_of(self._next_start))
            self._next_start = self._end_of(self._next_start)
        return out

    def drain(self, until_unix_nano: int) -> list[InstanceInterval]:
        """Every interval left through the last recorded request's end, at least to `until`. Work whose
        caller gave up can keep an overloaded instance busy long after that: it is not waited for, or a
        run of a given duration would go on reporting metrics of no request."""
        last = max([until_unix_nano] + [r[1] for p in self._pending.values() for r in p.requests])
        out = []
        while self._next_start < last:
            out += self.closed(self._end_of(self._next_start))
        return out

    def _report(self, start: int, end: int) -> list[InstanceInterval]:
        out = []
        elapsed_s = (start - self.start_unix_nano) / 1e9
        for name, info in self._infos.items():
            pending = self._pending[name]
            ended = tuple((ms, error) for _, e, ms, error in pending.requests if e < end)
            busy = sum(max(0, min(e, end) - max(b, start)) for b, e in pending.work)
            out.append(InstanceInterval(
                info, self.settings, start, end, ended, _most_in_flight(pending.requests, start, end),
                self._capacity(info.service, name, elapsed_s), min(1.0, busy / (info.workers * (end - start))),
            ))
            pending.requests = [r for r in pending.requests if r[1] >= end]
            pending.work = [w for w in pending.work if w[1] > end]
        return out


def _most_in_flight(requests: Iterable[tuple[int, int, float, str | None]], start: int, end: int) -> int:
    """The most requests in flight at one instant of [start, end)."""
    events = []
    for s, e, _, _ in requests:
        if s < end and e > start:
            events += [(max(s, start), 1), (e, -1)]
    # At one instant an ending request leaves before a new one comes.
    events.sort(key=lambda event: (event[0], event[1]))
    most = current = 0
    for _, delta in events:
        current += delta
        most = max(most, current)
    return most


def _point_attributes(info: InstanceInfo) -> list[tuple[str, str]]:
    if info.transport == "http":
        method, _, route = info.operation.partition(" ")
        return [("http.request.method", method), ("http.route", route)]
    rpc_service, _, method = info.operation.rpartition("/")
    return [("rpc.system", "grpc"), ("rpc.service", rpc_service), ("rpc.method", method)]


DURATION_METRIC = {"http": "http.server.request.duration", "grpc": "rpc.server.call.duration"}


def _histogram_points(interval: InstanceInterval) -> list[dict]:
    bounds_s = [b / 1000 for b in interval.settings.bounds_ms]
    by_error: dict[str | None, list[float]] = {None: []}
    for ms, error in interval.latencies:
        by_error.setdefault(error, []).append(ms / 1000)
    points = []
    for error, values in by_error.items():
        attributes = _point_attributes(interval.info) + ([("error.type", error)] if error else [])
        point = {
            "attributes": attributes_json(attributes),
            "startTimeUnixNano": str(interval.start_unix_nano),
            "timeUnixNano": str(interval.end_unix_nano),
            # fixed64 fields are JSON strings in OTLP/JSON.
            "count": str(len(values)),
            "sum": sum(values),
            "bucketCounts": [str(c) for c in bucket_counts(bounds_s, values)],
            "explicitBounds": bounds_s,
        }
        if values:
            point |= {"min": min(values), "max": max(values)}
        points.append(point)
    return points


def _gauge(name: str, unit: str, time_unix_nano: int, value: float | int) -> dict:
    number = {"asInt": str(value)} if isinstance(value, int) else {"asDouble": value}
    return {"name": name, "unit": unit, "gauge": {"dataPoints": [{"timeUnixNano": str(time_unix_nano), **number}]}}


def otlp_metrics_request(intervals: Iterable[InstanceInterval]) -> dict:
    """An ExportMetricsServiceRequest of the intervals (a resource per instance and interval)."""
    resource_metrics = []
    for interval in intervals:
        record = interval.record()
        t = interval.end_unix_nano
        metrics = [
            {
                "name": DURATION_METRIC[interval.info.transport],
                "unit": "s",
                "histogram": {
                    "dataPoints": _histogram_points(interval),
                    "aggregationTemporality": AGGREGATION_TEMPORALITY_DELTA,
                },
            },
            _gauge("stormwatch.server.active_requests.max", "{request}", t, record["in_flight"]),
            _gauge("stormwatch.server.concurrency_limit", "{request}", t, record["concurrency_limit"]),
            _gauge("stormwatch.server.capacity", "{request}/s", t, record["capacity_rps"]),
            _gauge("process.cpu.utilization", "1", t, record["cpu_utilization"]),
        ]
        resource_metrics.append({
            "resource": resource_json(interval.info.service, interval.info.instance),
            "scopeMetrics": [{"scope": SCOPE, "metrics": metrics}],
        })
    return {"resourceMetrics": resource_metrics}
