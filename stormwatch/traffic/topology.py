"""The call graph the traffic generator draws traces from, as data: traced `Service`s on `Instance`s of
different capacity and speed, each a sequence of its own `Stage`s and `Call`s to other services or to
untraced `External` dependencies, with an LLM service's `Tokens`. `DEFAULT_TOPOLOGY` is the AI tool chain
gateway -> orchestrator -> llm-inference / retrieval -> vector-db / tool-runner -> search and LLM APIs.
How instances queue and are sized is described in stormwatch/traffic/generator.py, which uses them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property
from typing import Literal


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
