"""Deterministic OTLP traces of an AI tool chain: gateway -> orchestrator -> LLM inference, retrieval, tools.

`TraceGenerator` draws every trace from one seeded `random.Random`, ids included, so the same seed and
parameters give the same spans and, through `to_export_requests` and `encode`, the same bytes. The
messages are ExportTraceServiceRequests as the OpenTelemetry Collector's kafka exporter writes them with
`encoding: otlp_json`, which is what sql/tables/otlp_spans.sql reads.

The call graph is data (`Topology`), latencies are lognormal around per-service medians, errors start
at a background rate and mostly propagate to the callers, and `Fault`s (e.g. `FaultWindow`) change a
service's or one instance's latency and error rate for traces starting in a window of event time.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from itertools import islice
from typing import Literal, Protocol

# 2026-01-01T00:00:00Z: a fixed default, so output does not depend on when it is generated.
DEFAULT_START_UNIX_NANO = 1_767_225_600 * 10**9

# The instrumentation scope every span is reported under.
SCOPE = {"name": "stormwatch.traffic"}

# Attribute values the generator produces; OTLP/JSON writes an int64 as a string.
AttributeValue = str | int


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
class Service:
    """A traced service: one SERVER span per request on one of its instances, then its steps in order."""

    name: str
    operation: str  # "POST /route" for http, "package.Service/Method" for grpc
    transport: Literal["http", "grpc"]
    base_ms: float  # median of the time the service spends outside its steps
    instances: tuple[float, ...]  # latency multiplier (inverse capacity) of instance i, f"{name}-{i}"
    steps: tuple[Stage | Call, ...] = ()
    sigma: float = 0.3
    tokens: Tokens | None = None
    error_message: str = "internal error"
    # Requests/s one instance serves; its latency climbs as load nears it (an M/M/1 queue's
    # 1 / (1 - utilisation), capped at MAX_UTILISATION). None: load never slows it.
    capacity_rps: float | None = None


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


# Past this utilisation a queue grows without bound; the generator holds it here (latency x 20).
MAX_UTILISATION = 0.95


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
        """Expected requests to each node per trace (before retries): its load at a trace rate of 1/s."""
        out: dict[str, float] = {}

        def walk(name: str, weight: float) -> None:
            out[name] = out.get(name, 0.0) + weight
            node = self.nodes[name]
            for step in node.steps if isinstance(node, Service) else ():
                if isinstance(step, Call):
                    walk(step.target, weight * step.probability)

        walk(self.root, 1.0)
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
            "gateway", "POST /v1/chat", "http", base_ms=2.0, instances=(1.0, 1.15),
            steps=(Call("orchestrator"),), error_message="auth backend timeout",
        ),
        Service(
            "orchestrator", "agent.Orchestrator/Run", "grpc", base_ms=4.0, instances=(1.0, 1.0, 1.4),
            steps=(Call("retrieval", 0.9), Call("llm-inference"), Call("tool-runner", 0.4)),
            error_message="plan validation failed",
        ),
        Service(
            "llm-inference", "inference.Generator/Generate", "grpc", base_ms=1.0, instances=(1.0, 1.0, 1.8),
            steps=(
                Stage("tokenize", 1.5),
                Stage("kv-cache-load", 8.0),
                Stage("decode", 5.0, ms_per_output_token=12.0),
            ),
            tokens=Tokens("llama-3.1-8b-instruct", median_input=600, median_output=180),
            error_message="CUDA out of memory",
        ),
        Service(
            "retrieval", "POST /v1/retrieve", "http", base_ms=3.0, instances=(1.0, 1.25),
            steps=(Call("vector-db"),), error_message="embedding model not loaded",
        ),
        Service(
            "tool-runner", "POST /v1/tools/invoke", "http", base_ms=5.0, instances=(1.0, 1.0, 1.3),
            steps=(Call("search-api", 0.7), Call("llm-api", 0.3)), error_message="tool sandbox crashed",
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
    """Error rates and network delay; latencies live in the topology."""

    # Chance that a SERVER span (or an external call) fails by itself, per service unless overridden.
    error_rate: float = 0.005
    service_error_rates: Mapping[str, float] = field(default_factory=dict)
    # Chance that a caller fails when a call fails; otherwise it catches the error and carries on.
    propagation: float = 0.85
    # One-way delay between a CLIENT span and its SERVER span, each way: lognormal around network_ms.
    network_ms: float = 0.3
    network_sigma: float = 0.5
    # How often a caller tries a failed call again (caller name -> retries): each retry is a real call,
    # so a failing callee sees its load multiplied, a retry storm.
    retries: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_probability("error_rate", self.error_rate)
        _check_probability("propagation", self.propagation)
        for name, rate in self.service_error_rates.items():
            _check_probability(f"service_error_rates[{name!r}]", rate)


@dataclass(frozen=True)
class FaultEffect:
    latency_factor: float = 1.0
    error_rate: float = 0.0


NO_EFFECT = FaultEffect()


class Fault(Protocol):
    """Something that changes a service's spans in traces that start `elapsed_s` after the generator's start.

    `instance` is None for an external dependency, which has no instances.
    """

    def effect(self, service: str, instance: str | None, elapsed_s: float) -> FaultEffect: ...


@dataclass(frozen=True, kw_only=True)
class FaultWindow:
    """Slows `service` (or only its `instance`) and adds failures, for traces starting in [start_s, end_s)."""

    service: str
    instance: str | None = None
    start_s: float
    end_s: float
    latency_factor: float = 1.0
    error_rate: float = 0.0

    def __post_init__(self) -> None:
        if self.end_s <= self.start_s:
            raise ValueError(f"FaultWindow: end_s {self.end_s} is not after start_s {self.start_s}")
        if self.latency_factor <= 0:
            raise ValueError(f"FaultWindow: latency_factor must be positive, got {self.latency_factor}")
        _check_probability("FaultWindow.error_rate", self.error_rate)

    def effect(self, service: str, instance: str | None, elapsed_s: float) -> FaultEffect:
        hit = (
            service == self.service
            and self.instance in (None, instance)
            and self.start_s <= elapsed_s < self.end_s
        )
        return FaultEffect(self.latency_factor, self.error_rate) if hit else NO_EFFECT


# ---------------------------------------------------------------------------------------------------
# Generation


def _call_attributes(node: Service | External, failed: bool) -> tuple[str, list[tuple[str, AttributeValue]]]:
    """(CLIENT span name, attributes both ends of a call carry), in OTel semantic conventions."""
    if node.transport == "grpc":
        rpc_service, _, method = node.operation.rpartition("/")
        # gRPC status 13 is INTERNAL.
        return node.operation, [
            ("rpc.system", "grpc"), ("rpc.service", rpc_service), ("rpc.method", method),
            ("rpc.grpc.status_code", 13 if failed else 0),
        ]
    if node.transport == "db":
        operation, _, collection = node.operation.partition(" ")
        return node.operation, [
            ("db.system", node.db_system), ("db.operation.name", operation), ("db.collection.name", collection),
        ]
    if node.transport == "http":
        method = node.operation.partition(" ")[0]
        return method, [("http.request.method", method), ("http.response.status_code", 500 if failed else 200)]
    raise ValueError(f"{node.name}: unknown transport {node.transport!r}")


def _ns(ms: float) -> int:
    return round(ms * 1e6)


@dataclass
class _Trace:
    trace_id: str
    elapsed_s: float  # the trace's start after the generator's start: what faults are scheduled on
    spans: list[Span] = field(default_factory=list)

    def add(self, span_id: str, parent_span_id: str, service: str, instance: str, name: str, kind: SpanKind,
            start: int, end: int, attributes: list[tuple[str, AttributeValue]], failure: str) -> None:
        status = StatusCode.ERROR if failure else StatusCode.UNSET
        self.spans.append(Span(self.trace_id, span_id, parent_span_id, service, instance, name, kind,
                               start, end, tuple(attributes), status, failure))


class TraceGenerator:
    """Traces of `topology` in event time from `start_unix_nano`, all drawn from `random.Random(seed)`.

    The generator keeps an event-time clock: each call of `generate` or `traces` carries on where the
    previous one stopped.
    """

    def __init__(
        self,
        seed: int = 0,
        start_unix_nano: int = DEFAULT_START_UNIX_NANO,
        topology: Topology = DEFAULT_TOPOLOGY,
        faults: Iterable[Fault] = (),
        params: Params = Params(),
    ) -> None:
        self._rng = random.Random(seed)
        self.start_unix_nano = start_unix_nano
        self.topology = topology
        self.faults = tuple(faults)
        self.params = params
        self._elapsed_s = 0.0
        self._rate_per_s = 0.0

    def generate(self, rate_per_s: float, duration_s: float | None = None) -> Iterator[list[Span]]:
        """Traces starting at exponential inter-arrival times (a Poisson process of `rate_per_s`), for
        `duration_s` of event time or without end. Each trace's spans come in the order they end, as an
        SDK exports them."""
        if rate_per_s <= 0:
            raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
        end_s = None if duration_s is None else self._elapsed_s + duration_s
        self._rate_per_s = rate_per_s
        while True:
            next_s = self._elapsed_s + self._rng.expovariate(rate_per_s)
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
        # Several faults on one span: slowdowns compound, failure causes are independent.
        effects = [fault.effect(service, instance, elapsed_s) for fault in self.faults]
        return FaultEffect(
            latency_factor=math.prod(e.latency_factor for e in effects),
            error_rate=1.0 - math.prod(1.0 - e.error_rate for e in effects),
        )

    def _failure(self, name: str, effect: FaultEffect, message: str) -> str:
        """`message` if a span of `name` fails by itself (background rate or fault), else ""."""
        background = self.params.service_error_rates.get(name, self.params.error_rate)
        failing = 1.0 - (1.0 - background) * (1.0 - effect.error_rate)
        return message if self._rng.random() < failing else ""

    def _queueing(self, service: Service) -> float:
        """How much the load on one instance of `service` slows it at the current trace rate."""
        if service.capacity_rps is None:
            return 1.0
        per_instance = self._rate_per_s * self.topology.visits[service.name] / len(service.instances)
        return 1.0 / (1.0 - min(per_instance / service.capacity_rps, MAX_UTILISATION))

    def _network_ns(self) -> int:
        return _ns(self.params.network_ms * self._rng.lognormvariate(0.0, self.params.network_sigma))

    def _serve(self, trace: _Trace, service: Service, parent_span_id: str, start: int) -> tuple[int, str]:
        """The SERVER span of one request to `service` and all spans under it: (its end, its error or "")."""
        rng = self._rng
        index = rng.randrange(len(service.instances))
        instance = f"{service.name}-{index}"
        effect = self._effect(service.name, instance, trace.elapsed_s)
        scale = service.instances[index] * effect.latency_factor * self._queueing(service)
        span_id = self._id(64)
        failure = self._failure(service.name, effect, service.error_message)
        attributes: list[tuple[str, AttributeValue]] = []
        output_tokens = 0
        if tokens := service.tokens:
            input_tokens, output_tokens = tokens.draw(rng)
            attributes += [
                ("gen_ai.operation.name", "chat"), ("gen_ai.request.model", tokens.model),
                ("gen_ai.usage.input_tokens", input_tokens), ("gen_ai.usage.output_tokens", output_tokens),
            ]
        # The service's own time, split at random into the gaps before, between and after its steps.
        own_ms = service.base_ms * scale * rng.lognormvariate(0.0, service.sigma)
        weights = [rng.expovariate(1.0) for _ in range(len(service.steps) + 1)]
        gaps = [_ns(own_ms * w / sum(weights)) for w in weights]
        cursor = start + gaps[0]
        for step, gap in zip(service.steps, gaps[1:]):
            callee_failure = ""
            if isinstance(step, Stage):
                cursor = self._stage(trace, step, service, instance, span_id, cursor, scale, output_tokens)
            elif rng.random() < step.probability:
                cursor, callee_failure = self._call(trace, service.name, instance, span_id, step.target, cursor)
                for attempt in range(1, self.params.retries.get(service.name, 0) + 1):
                    if not callee_failure:
                        break
                    cursor, callee_failure = self._call(trace, service.name, instance, span_id, step.target,
                                                        cursor, resend_count=attempt)
            cursor += gap
            if callee_failure and rng.random() < self.params.propagation:
                # The request fails here: the service answers at once and skips its remaining steps.
                failure = failure or f"{step.target}: {callee_failure}"
                break
        _, shared = _call_attributes(service, bool(failure))
        if service.transport == "http":
            shared.append(("http.route", service.operation.partition(" ")[2]))
        trace.add(span_id, parent_span_id, service.name, instance, service.operation, SpanKind.SERVER,
                  start, cursor, shared + attributes, failure)
        return cursor, failure

    def _stage(self, trace: _Trace, stage: Stage, service: Service, instance: str, parent_span_id: str,
               start: int, scale: float, output_tokens: int) -> int:
        """The INTERNAL span of one stage; returns its end."""
        ms = (stage.base_ms + stage.ms_per_output_token * output_tokens) * scale
        end = start + _ns(ms * self._rng.lognormvariate(0.0, service.sigma))
        attributes = [("gen_ai.usage.output_tokens", output_tokens)] if stage.ms_per_output_token else []
        trace.add(self._id(64), parent_span_id, service.name, instance, stage.name, SpanKind.INTERNAL,
                  start, end, attributes, "")
        return end

    def _call(self, trace: _Trace, caller: str, caller_instance: str, parent_span_id: str, target_name: str,
              start: int, resend_count: int = 0) -> tuple[int, str]:
        """The caller's CLIENT span of one call and, for a traced target, the callee's spans under it:
        (the call's end, its error or "")."""
        target = self.topology.nodes[target_name]
        span_id = self._id(64)
        if isinstance(target, External):
            effect = self._effect(target.name, None, trace.elapsed_s)
            end = start + _ns(target.base_ms * effect.latency_factor * self._rng.lognormvariate(0.0, target.sigma))
            failure = self._failure(target.name, effect, target.error_message)
            peer = [("server.address", target.address), ("peer.service", target.name)]
        else:
            server_end, failure = self._serve(trace, target, span_id, start + self._network_ns())
            end = server_end + self._network_ns()
            peer = [("server.address", target.name)]
        name, shared = _call_attributes(target, bool(failure))
        if resend_count:
            # The semantic conventions' retry counter (HTTP's name; RPC has none of its own yet).
            shared.append(("http.request.resend_count", resend_count))
        trace.add(span_id, parent_span_id, caller, caller_instance, name, SpanKind.CLIENT,
                  start, end, shared + peer, failure)
        return end, failure


# ---------------------------------------------------------------------------------------------------
# OTLP/JSON


def _attributes_json(attributes: Iterable[tuple[str, AttributeValue]]) -> list[dict]:
    # int64 values are JSON strings in OTLP/JSON (the proto3 JSON mapping).
    return [
        {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}}
        for key, value in attributes
    ]


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
        out["attributes"] = _attributes_json(span.attributes)
    out["status"] = {"code": int(span.status_code), "message": span.status_message} if span.status_code else {}
    return out


def _export_request(spans: list[Span]) -> dict:
    by_resource: dict[tuple[str, str], list[dict]] = {}
    for span in spans:
        by_resource.setdefault((span.service, span.instance), []).append(_span_json(span))
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attributes_json([("service.name", service), ("service.instance.id", instance)])
                },
                "scopeSpans": [{"scope": SCOPE, "spans": items}],
            }
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


def encode(request: dict) -> bytes:
    """One Kafka message value: compact JSON, as the Collector's otlp_json encoding writes it."""
    return json.dumps(request, separators=(",", ":")).encode()
