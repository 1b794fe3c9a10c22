"""Deterministic OTLP traces of an AI tool chain: gateway -> orchestrator -> LLM inference, retrieval, tools.

`TraceGenerator` draws every trace from one seeded `random.Random`, ids included, so the same seed and
parameters give the same spans and, through `to_export_requests` and `stormwatch.traffic.otlp.encode`,
the same bytes. The messages are ExportTraceServiceRequests as the OpenTelemetry Collector's kafka
exporter writes them with `encoding: otlp_json` (stormwatch/otlp_encoding.py turns them into
otlp_proto where the configuration says so). Event time is the start time plus
the generator's own clock; the wall clock is never read.

The call graph is data (`Topology`). Each service runs on several `Instance`s of different capacity:
an instance is a queue with `workers` servers whose exponential work adds up to its capacity in
requests/s, so a request waits before it is worked on, a little at low utilisation and without bound
as the utilisation nears 1 (a request that would wait longer than the service's `max_queue_ms` is
rejected at once: load shedding). Capacities are sized from the nominal rate (`nominal_rate_per_s`):
an instance with `headroom` 2 runs at utilisation 0.5 under the nominal load, whatever that rate is.
Latencies are lognormal around per-service medians, errors start at a background rate and mostly
propagate to the callers, callers retry failed calls (`Params.retries`, each retry a CLIENT span with
`http.request.resend_count`), and `Fault`s (e.g. `FaultWindow`) change a service's or one instance's
latency, error rate and capacity for traces starting in a window of event time, while a `LoadShape`
changes the arrival rate over time.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from itertools import islice
from typing import Literal, Protocol

from stormwatch.traffic.metrics import InstanceInfo, InstanceInterval, MetricsRecorder, MetricsSettings
from stormwatch.traffic.otlp import SCOPE, AttributeValue, attributes_json, resource_json

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
# Topology


@dataclass(frozen=True)
class Stage:
    """A step a service does itself: an INTERNAL span under its SERVER span."""

    name: str
    base_ms: float
    # Makes a stage such as `decode` take time in proportion to the output tokens drawn for the request.
    ms_per_output_token: float = 0.0


@dataclass(frozen=True)
class Call:
    """A step that calls another service or an external dependency, made with `probability` per request."""

    target: str
    probability: float = 1.0


@dataclass(frozen=True)
class Tokens:
    """The token counts an LLM request reads and writes: lognormal around the medians."""

    model: str
    median_input: int
    median_output: int
    sigma: float = 0.6
    max_output: int = 1024

    def draw(self, rng: random.Random) -> tuple[int, int]:
        """(input tokens, output tokens) of one request."""
        input_tokens, output_tokens = (
            max(1, round(median * rng.lognormvariate(0.0, self.sigma)))
            for median in (self.median_input, self.median_output)
        )
        return input_tokens, min(self.max_output, output_tokens)


@dataclass(frozen=True)
class Instance:
    """One instance of a service, f"{service}-{i}" for the i-th.

    `headroom` is its capacity over its share of the service's nominal load (requests are spread
    evenly over the instances): 2.0 serves the nominal rate at utilisation 0.5, 1.25 at 0.8.
    `latency_factor` makes it slower at everything it does (older hardware); `workers` is how many
    requests it works on at once: many for an async HTTP/gRPC server, so it queues only when it runs out
    of capacity; GPU instances batch a few.
    """

    headroom: float = 2.0
    latency_factor: float = 1.0
    workers: int = 64

    def __post_init__(self) -> None:
        if self.headroom <= 0 or self.latency_factor <= 0 or self.workers < 1:
            raise ValueError(f"Instance: headroom and latency_factor must be positive, workers at least 1: {self}")


@dataclass(frozen=True)
class Service:
    """A traced service: one SERVER span per request on one of its instances, then its steps in order."""

    name: str
    operation: str  # "POST /route" for http, "package.Service/Method" for grpc
    transport: Literal["http", "grpc"]
    base_ms: float  # median of the time the service spends outside its steps
    instances: tuple[Instance, ...]
    steps: tuple[Stage | Call, ...] = ()
    sigma: float = 0.3
    tokens: Tokens | None = None
    error_message: str = "internal error"
    # A request that would wait longer than this in an instance's queue is rejected at once.
    max_queue_ms: float = 2000.0


@dataclass(frozen=True)
class External:
    """A dependency that is not traced: only the caller's CLIENT span shows it, named by peer.service."""

    name: str
    address: str  # server.address
    operation: str  # "GET /path" for http, "operation collection" for db
    transport: Literal["http", "db"]
    base_ms: float
    sigma: float = 0.4
    db_system: str = ""
    error_message: str = "unavailable"


@dataclass(frozen=True)
class Topology:
    root: str
    services: tuple[Service, ...]
    externals: tuple[External, ...] = ()

    def __post_init__(self) -> None:
        if len(self.nodes) != len(self.services) + len(self.externals):
            raise ValueError("topology: two services or externals share a name")
        if not isinstance(self.nodes.get(self.root), Service):
            raise ValueError(f"topology: root {self.root!r} is not a traced service")
        self._check(self.root, ())

    @cached_property
    def nodes(self) -> dict[str, Service | External]:
        return {node.name: node for node in (*self.services, *self.externals)}

    @cached_property
    def visits(self) -> dict[str, float]:
        """Expected first-attempt requests per trace to each service: what capacities are sized on."""
        out: dict[str, float] = {}

        def visit(name: str, weight: float) -> None:
            out[name] = out.get(name, 0.0) + weight
            node = self.nodes[name]
            for step in node.steps if isinstance(node, Service) else ():
                if isinstance(step, Call):
                    visit(step.target, weight * step.probability)

        visit(self.root, 1.0)
        return out

    def _check(self, name: str, path: tuple[str, ...]) -> None:
        # Generation recurses along calls, so an unknown target or a cycle must fail here instead.
        node = self.nodes.get(name)
        if node is None:
            raise ValueError(f"topology: {path[-1]} calls unknown {name!r}")
        if name in path:
            raise ValueError(f"topology: call cycle {' -> '.join((*path, name))}")
        if isinstance(node, External):
            return
        if not node.instances:
            raise ValueError(f"topology: {name} has no instances")
        for step in node.steps:
            if isinstance(step, Call):
                self._check(step.target, (*path, name))
            elif step.ms_per_output_token and node.tokens is None:
                raise ValueError(f"topology: stage {step.name} of {name} is per token but {name} has no Tokens")


DEFAULT_TOPOLOGY = Topology(
    root="gateway",
    services=(
        Service(
            "gateway", "POST /v1/chat", "http", base_ms=2.0,
            instances=(Instance(2.5), Instance(2.0, latency_factor=1.15)),
            steps=(Call("orchestrator"),), error_message="auth backend timeout",
        ),
        Service(
            "orchestrator", "agent.Orchestrator/Run", "grpc", base_ms=4.0,
            instances=(Instance(2.5), Instance(2.5), Instance(1.6, latency_factor=1.4)),
            steps=(
                Call("retrieval", 0.9),
                Call("llm-inference"),
                Call("tool-runner", 0.4),
            ),
            error_message="plan validation failed",
        ),
        Service(
            # GPU instances: few requests batched at once, and a third on an older card.
            "llm-inference", "inference.Generator/Generate", "grpc", base_ms=1.0,
            instances=(Instance(2.0, workers=2), Instance(2.0, workers=2), Instance(1.4, latency_factor=1.8, workers=2)),
            steps=(
                Stage("tokenize", 1.5),
                Stage("kv-cache-load", 8.0),
                Stage("decode", 5.0, ms_per_output_token=12.0),
            ),
            tokens=Tokens("llama-3.1-8b-instruct", median_input=600, median_output=180),
            error_message="CUDA out of memory", max_queue_ms=5000.0,
        ),
        Service(
            "retrieval", "POST /v1/retrieve", "http", base_ms=3.0,
            instances=(Instance(2.5), Instance(1.8, latency_factor=1.25)),
            steps=(Call("vector-db"),), error_message="embedding model not loaded",
        ),
        Service(
            "tool-runner", "POST /v1/tools/invoke", "http", base_ms=5.0,
            instances=(Instance(2.5), Instance(2.5), Instance(1.8, latency_factor=1.3)),
            steps=(Call("search-api", 0.7), Call("llm-api", 0.3)),
            error_message="tool sandbox crashed",
        ),
    ),
    externals=(
        External(
            "vector-db", "vector-db.data.svc", "search documents", "db", base_ms=6.0,
            db_system="qdrant", error_message="deadline exceeded",
        ),
        External(
            "search-api", "api.search.example.com", "GET /v1/search", "http", base_ms=250.0,
            error_message="upstream timeout",
        ),
        External(
            "llm-api", "api.llm-provider.example.com", "POST /v1/chat/completions", "http", base_ms=900.0,
            sigma=0.5, error_message="provider overloaded",
        ),
    ),
)


# ---------------------------------------------------------------------------------------------------
# Rates and faults


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


# ---------------------------------------------------------------------------------------------------
# OTLP/JSON


def _span_json(span: Span) -> dict:
    out = {"traceId": span.trace_id, "spanId": span.span_id}
    # The Collector omits empty fields: a root has no parentSpanId, an UNSET status is {}.
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id
    out |= {
        "name": span.name,
        "kind": int(span.kind),
        "startTimeUnixNano": str(span.start_unix_nano),
        "endTimeUnixNano": str(span.end_unix_nano),
    }
    if span.attributes:
        out["attributes"] = attributes_json(span.attributes)
    out["status"] = {"code": int(span.status_code), "message": span.status_message} if span.status_code else {}
    return out


def _export_request(spans: list[Span]) -> dict:
    by_resource: dict[tuple[str, str], list[dict]] = {}
    for span in spans:
        by_resource.setdefault((span.service, span.instance), []).append(_span_json(span))
    return {
        "resourceSpans": [
            {"resource": resource_json(service, instance), "scopeSpans": [{"scope": SCOPE, "spans": items}]}
            for (service, instance), items in by_resource.items()
        ]
    }


def to_export_requests(spans: Iterable[Span], max_spans_per_message: int = 256) -> list[dict]:
    """ExportTraceServiceRequests of at most `max_spans_per_message` spans each, keeping the spans' order
    across messages and grouping a message's spans by resource (service and instance) as the Collector does."""
    if max_spans_per_message < 1:
        raise ValueError(f"max_spans_per_message must be at least 1, got {max_spans_per_message}")
    spans = list(spans)
    return [
        _export_request(spans[i : i + max_spans_per_message])
        for i in range(0, len(spans), max_spans_per_message)
    ]
