"""Deterministic OTLP traces of an AI tool chain: gateway -> orchestrator -> LLM inference, retrieval, tools.

`TraceGenerator` draws every trace from one seeded `random.Random`, ids included, so the same seed and
parameters give the same spans and, through `stormwatch.traffic.otlp.to_export_requests` and
`connectors.otlp.encoder`, the same bytes: ExportTraceServiceRequests as the OpenTelemetry Collector's
kafka exporter writes them. Event time is the start time plus
the generator's own clock; the wall clock is never read.

The call graph is data (`Topology`, stormwatch/traffic/topology.py). Each service runs on several `Instance`s of different capacity:
an instance is a queue with `workers` servers whose exponential work adds up to its capacity in
requests/s, so a request waits before it is worked on, a little at low utilisation and without bound
as the utilisation nears 1 (a request that would wait longer than the service's `max_queue_ms` is
rejected at once: load shedding). Capacities are sized from the nominal rate (`nominal_rate_per_s`):
an instance with `headroom` 2 runs at utilisation 0.5 under the nominal load, whatever that rate is.
Latencies are lognormal around per-service medians, errors start at a background rate and mostly
propagate to the callers, callers retry failed calls (`Params.retries`, each retry a CLIENT span with
`http.request.resend_count`), and `Fault`s (e.g. `FaultWindow`; stormwatch/traffic/faults.py) change a service's or one instance's
latency, error rate and capacity for traces starting in a window of event time, while a `LoadShape`
changes the arrival rate over time.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import islice

from connectors.otlp import AttributeValue
from stormwatch.traffic.faults import Fault, FaultEffect, LoadShape, Params
from stormwatch.traffic.metrics import InstanceInfo, InstanceInterval, MetricsRecorder, MetricsSettings
from stormwatch.traffic.topology import DEFAULT_TOPOLOGY, Call, External, Service, Stage, Topology

# 2026-01-01T00:00:00Z: a fixed default, so output does not depend on when it is generated.
DEFAULT_START_UNIX_NANO = 1_767_225_600 * 10**9

# The semantic-convention attribute of a retried call: 1 on the first retry, 2 on the second...
RESEND_COUNT = "http.request.resend_count"


class SpanKind(IntEnum):
    """The OTLP span kinds this traffic uses, with their OTLP numbers."""

    INTERNAL = 1
    SERVER = 2
    CLIENT = 3


class StatusCode(IntEnum):
    """OTLP status codes; instrumentation leaves a successful span UNSET rather than OK."""

    UNSET = 0
    ERROR = 2


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a trace's root
    service: str
    instance: str
    name: str
    kind: SpanKind
    start_unix_nano: int
    end_unix_nano: int
    attributes: tuple[tuple[str, AttributeValue], ...] = ()
    status_code: StatusCode = StatusCode.UNSET
    status_message: str = ""


# ---------------------------------------------------------------------------------------------------
# Generation


@dataclass(frozen=True)
class _Failure:
    message: str
    overloaded: bool = False  # rejected by a full queue (HTTP 503, gRPC RESOURCE_EXHAUSTED)


# (status code, error.type) of a failed call by transport, for a failure and for a rejection.
_HTTP_STATUS = {False: 500, True: 503}
_GRPC_STATUS = {False: (13, "INTERNAL"), True: (8, "RESOURCE_EXHAUSTED")}


def _error_type(transport: str, failure: _Failure) -> str:
    """The `error.type` of a failed request, as the HTTP / RPC semantic conventions set it."""
    if transport == "http":
        return str(_HTTP_STATUS[failure.overloaded])
    if transport == "grpc":
        return _GRPC_STATUS[failure.overloaded][1]
    return "_OTHER"


def _call_attributes(node: Service | External, failure: _Failure | None) -> tuple[str, list[tuple[str, AttributeValue]]]:
    """(CLIENT span name, attributes both ends of a call carry), in OTel semantic conventions."""
    if node.transport == "grpc":
        rpc_service, _, method = node.operation.rpartition("/")
        out = [("rpc.system", "grpc"), ("rpc.service", rpc_service), ("rpc.method", method),
               ("rpc.grpc.status_code", _GRPC_STATUS[failure.overloaded][0] if failure else 0)]
        name = node.operation
    elif node.transport == "db":
        operation, _, collection = node.operation.partition(" ")
        out = [("db.system", node.db_system), ("db.operation.name", operation), ("db.collection.name", collection)]
        name = node.operation
    elif node.transport == "http":
        name = node.operation.partition(" ")[0]
        out = [("http.request.method", name),
               ("http.response.status_code", _HTTP_STATUS[failure.overloaded] if failure else 200)]
    else:
        raise ValueError(f"{node.name}: unknown transport {node.transport!r}")
    if failure:
        out.append(("error.type", _error_type(node.transport, failure)))
    return name, out


def _ns(ms: float) -> int:
    return round(ms * 1e6)


@dataclass
class _Trace:
    trace_id: str
    elapsed_s: float  # the trace's start after the generator's start: what faults are scheduled on
    spans: list[Span] = field(default_factory=list)

    def add(self, span_id: str, parent_span_id: str, service: str, instance: str, name: str, kind: SpanKind,
            start: int, end: int, attributes: list[tuple[str, AttributeValue]], failure: _Failure | None) -> None:
        status = StatusCode.ERROR if failure else StatusCode.UNSET
        self.spans.append(Span(self.trace_id, span_id, parent_span_id, service, instance, name, kind,
                               start, end, tuple(attributes), status, failure.message if failure else ""))


class _Queue:
    """An instance's first-come first-served queue: `workers` servers, each request an exponential
    amount of work such that all of them together serve the instance's capacity in requests/s."""

    def __init__(self, workers: int, max_queue_ns: int) -> None:
        self.free = [0] * workers  # heap: when each worker is free
        self.workers = workers
        self.max_queue_ns = max_queue_ns

    def admit(self, arrival: int, capacity_rps: float, rng: random.Random) -> tuple[int, int] | None:
        """(work start, work end) of a request arriving at `arrival`; None when it is rejected."""
        begin = max(arrival, self.free[0])
        if begin - arrival > self.max_queue_ns:
            return None
        end = begin + round(rng.expovariate(capacity_rps / self.workers) * 1e9)
        heapq.heapreplace(self.free, end)
        return begin, end


class TraceGenerator:
    """Traces of `topology` in event time from `start_unix_nano`, all drawn from `random.Random(seed)`.

    The generator keeps an event-time clock: each call of `generate` or `traces` carries on where the
    previous one stopped. Instances are sized for `nominal_rate_per_s` traces/s (by default the rate
    of the first `generate`). With `metrics`, it also records per-instance request metrics of every
    interval, read with `metrics`.
    """

    def __init__(
        self,
        seed: int = 0,
        start_unix_nano: int = DEFAULT_START_UNIX_NANO,
        topology: Topology = DEFAULT_TOPOLOGY,
        faults: Iterable[Fault] = (),
        params: Params = Params(),
        load: LoadShape | None = None,
        nominal_rate_per_s: float | None = None,
        metrics: MetricsSettings | None = None,
    ) -> None:
        self._rng = random.Random(seed)
        self.start_unix_nano = start_unix_nano
        self.topology = topology
        self.faults = tuple(faults)
        self.params = params
        self.load = load
        self._elapsed_s = 0.0
        self._queues = {
            (s.name, i): _Queue(instance.workers, _ns(s.max_queue_ms))
            for s in topology.services for i, instance in enumerate(s.instances)
        }
        self._base_capacity: dict[str, float] = {}
        self._recorder = None
        if metrics is not None:
            infos = [
                InstanceInfo(s.name, f"{s.name}-{i}", s.transport, s.operation, instance.workers, s.max_queue_ms)
                for s in topology.services for i, instance in enumerate(s.instances)
            ]
            self._recorder = MetricsRecorder(metrics, start_unix_nano, infos, self.capacity_rps)
        if nominal_rate_per_s is not None:
            self._size(nominal_rate_per_s)

    @property
    def clock_unix_nano(self) -> int:
        """Event time of the latest trace's start: no span of a later trace ends before it."""
        return self.start_unix_nano + round(self._elapsed_s * 1e9)

    def capacity_rps(self, service: str, instance: str, elapsed_s: float) -> float:
        """Requests/s `instance` serves `elapsed_s` into the run, its faults included."""
        return self._base_capacity[instance] * self._effect(service, instance, elapsed_s).capacity_factor

    def metrics(self, final: bool = False) -> list[InstanceInterval]:
        """Per-instance metrics of the intervals no span can end in any more, in time order (`.record()`
        of each is its stormwatch_instance_metrics record); with `final`, of every interval left (after
        the last `generate`). Each interval is returned once."""
        if self._recorder is None:
            raise ValueError("TraceGenerator: made without metrics settings")
        clock = self.clock_unix_nano
        return self._recorder.drain(clock) if final else self._recorder.closed(clock)

    def _size(self, rate_per_s: float) -> None:
        for s in self.topology.services:
            share = rate_per_s * self.topology.visits.get(s.name, 0.0) / len(s.instances)
            for i, instance in enumerate(s.instances):
                # A service no call reaches still gets a capacity, as if it had the root's load.
                self._base_capacity[f"{s.name}-{i}"] = instance.headroom * (share or rate_per_s / len(s.instances))

    def generate(self, rate_per_s: float, duration_s: float | None = None) -> Iterator[list[Span]]:
        """Traces starting at exponential inter-arrival times (a Poisson process of `rate_per_s`, times
        the load shape), for `duration_s` of event time or without end. Each trace's spans come in the
        order they end, as an SDK exports them."""
        if rate_per_s <= 0:
            raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
        if not self._base_capacity:
            self._size(rate_per_s)
        end_s = None if duration_s is None else self._elapsed_s + duration_s
        while True:
            rate = rate_per_s * (self.load.factor(self._elapsed_s) if self.load else 1.0)
            next_s = self._elapsed_s + self._rng.expovariate(rate)
            if end_s is not None and next_s >= end_s:
                # Arrivals are memoryless, so the next call can start its own draw at the window's end.
                self._elapsed_s = end_s
                return
            self._elapsed_s = next_s
            yield self._trace(next_s)

    def traces(self, n: int, rate_per_s: float = 1.0) -> list[list[Span]]:
        """The next `n` traces of `generate(rate_per_s)`."""
        return list(islice(self.generate(rate_per_s), n))

    def _id(self, bits: int) -> str:
        # OTLP reserves the all-zero id for "no id".
        value = 0
        while value == 0:
            value = self._rng.getrandbits(bits)
        return f"{value:0{bits // 4}x}"

    def _trace(self, elapsed_s: float) -> list[Span]:
        trace = _Trace(self._id(128), elapsed_s)
        root = self.topology.nodes[self.topology.root]
        self._serve(trace, root, "", self.start_unix_nano + round(elapsed_s * 1e9))
        trace.spans.sort(key=lambda span: span.end_unix_nano)
        return trace.spans

    def _effect(self, service: str, instance: str | None, elapsed_s: float) -> FaultEffect:
        # Several faults on one span: slowdowns and capacity losses compound, delays add up, failure
        # causes are independent.
        effects = [fault.effect(service, instance, elapsed_s) for fault in self.faults]
        return FaultEffect(
            latency_factor=math.prod(e.latency_factor for e in effects),
            error_rate=1.0 - math.prod(1.0 - e.error_rate for e in effects),
            delay_ms=sum(e.delay_ms for e in effects),
            capacity_factor=math.prod(e.capacity_factor for e in effects),
        )

    def _failure(self, name: str, effect: FaultEffect, message: str) -> _Failure | None:
        """A failure with `message` if a span of `name` fails by itself (background rate or fault)."""
        background = self.params.service_error_rates.get(name, self.params.error_rate)
        failing = 1.0 - (1.0 - background) * (1.0 - effect.error_rate)
        return _Failure(message) if self._rng.random() < failing else None

    def _network_ns(self) -> int:
        return _ns(self.params.network_ms * self._rng.lognormvariate(0.0, self.params.network_sigma))

    def _serve(self, trace: _Trace, service: Service, parent_span_id: str, start: int) -> tuple[int, _Failure | None]:
        """The SERVER span of one request to `service` and all spans under it: (its end, its failure)."""
        rng = self._rng
        index = rng.randrange(len(service.instances))
        instance = f"{service.name}-{index}"
        effect = self._effect(service.name, instance, trace.elapsed_s)
        span_id = self._id(64)
        work = self._queues[(service.name, index)].admit(
            start, self.capacity_rps(service.name, instance, trace.elapsed_s), rng)
        scale = service.instances[index].latency_factor * effect.latency_factor
        attributes: list[tuple[str, AttributeValue]] = []
        if work is None:
            # Rejected by the full queue: answered at once, nothing of the request is done.
            failure = _Failure(f"{instance} overloaded: queue full", overloaded=True)
            cursor = start + _ns(service.base_ms * scale * rng.lognormvariate(0.0, service.sigma))
        else:
            failure = self._failure(service.name, effect, service.error_message)
            output_tokens = 0
            if tokens := service.tokens:
                input_tokens, output_tokens = tokens.draw(rng)
                attributes += [
                    ("gen_ai.operation.name", "chat"), ("gen_ai.request.model", tokens.model),
                    ("gen_ai.usage.input_tokens", input_tokens), ("gen_ai.usage.output_tokens", output_tokens),
                ]
            # The service's own time, split at random into the gaps before, between and after its steps;
            # the request starts being worked on once it leaves the queue.
            own_ms = (service.base_ms * scale + effect.delay_ms) * rng.lognormvariate(0.0, service.sigma)
            weights = [rng.expovariate(1.0) for _ in range(len(service.steps) + 1)]
            gaps = [_ns(own_ms * w / sum(weights)) for w in weights]
            cursor = work[0] + gaps[0]
            for step, gap in zip(service.steps, gaps[1:]):
                callee_failure = None
                if isinstance(step, Stage):
                    cursor = self._stage(trace, step, service, instance, span_id, cursor, scale, output_tokens)
                elif rng.random() < step.probability:
                    cursor, callee_failure = self._call(trace, service.name, instance, span_id, step.target, cursor)
                cursor += gap
                if callee_failure and rng.random() < self.params.propagation:
                    # The request fails here: the service answers at once and skips its remaining steps.
                    failure = failure or _Failure(f"{step.target}: {callee_failure.message}")
                    break
        _, shared = _call_attributes(service, failure)
        if service.transport == "http":
            shared.append(("http.route", service.operation.partition(" ")[2]))
        trace.add(span_id, parent_span_id, service.name, instance, service.operation, SpanKind.SERVER,
                  start, cursor, shared + attributes, failure)
        if self._recorder is not None:
            self._recorder.request(instance, start, cursor, _error_type(service.transport, failure) if failure else None)
            if work is not None:
                self._recorder.work(instance, *work)
        return cursor, failure

    def _stage(self, trace: _Trace, stage: Stage, service: Service, instance: str, parent_span_id: str,
               start: int, scale: float, output_tokens: int) -> int:
        """The INTERNAL span of one stage; returns its end."""
        ms = (stage.base_ms + stage.ms_per_output_token * output_tokens) * scale
        end = start + _ns(ms * self._rng.lognormvariate(0.0, service.sigma))
        attributes = [("gen_ai.usage.output_tokens", output_tokens)] if stage.ms_per_output_token else []
        trace.add(self._id(64), parent_span_id, service.name, instance, stage.name, SpanKind.INTERNAL,
                  start, end, attributes, None)
        return end

    def _call(self, trace: _Trace, caller: str, caller_instance: str, parent_span_id: str, target: str,
              start: int) -> tuple[int, _Failure | None]:
        """Every attempt of one call, retried while it fails: (the last attempt's end, its failure)."""
        cursor, failure = start, None
        for resend in range(self.params.retries.get(caller, 0) + 1):
            if resend:
                cursor += _ns(self._rng.uniform(0.0, self.params.retry_backoff_ms * 2 ** (resend - 1)))
            cursor, failure = self._attempt(trace, caller, caller_instance, parent_span_id, target, cursor, resend)
            if failure is None:
                break
        return cursor, failure

    def _attempt(self, trace: _Trace, caller: str, caller_instance: str, parent_span_id: str, target_name: str,
                 start: int, resend: int) -> tuple[int, _Failure | None]:
        """The caller's CLIENT span of one attempt and, for a traced target, the callee's spans under it:
        (the attempt's end, its failure)."""
        target = self.topology.nodes[target_name]
        span_id = self._id(64)
        if isinstance(target, External):
            effect = self._effect(target.name, None, trace.elapsed_s)
            ms = (target.base_ms * effect.latency_factor + effect.delay_ms) * self._rng.lognormvariate(0.0, target.sigma)
            end = start + _ns(ms)
            failure = self._failure(target.name, effect, target.error_message)
            peer = [("server.address", target.address), ("peer.service", target.name)]
        else:
            server_end, failure = self._serve(trace, target, span_id, start + self._network_ns())
            end = server_end + self._network_ns()
            peer = [("server.address", target.name)]
        name, shared = _call_attributes(target, failure)
        retry = [(RESEND_COUNT, resend)] if resend else []
        trace.add(span_id, parent_span_id, caller, caller_instance, name, SpanKind.CLIENT,
                  start, end, shared + peer + retry, failure)
        return end, failure
