"""One entity's decisions per window: its health, and for services and edges its circuit breaker and
retry gate. Called by the health job once per window and entity with the state it returned last time
(jobs/decision_stream.py keeps it in Flink state); returns the decisions to publish, enveloped.

A health record is published every window; a breaker decision only when the breaker changes state or
admitted share; a retry gate only when what callers act on (retries, delays, jitter) changes, not for
the budget alone, which moves with every window's traffic.

The health record of a service or an edge also names its breaker as of the window's end (`breaker`: the
decision_id, state, window_end_ms and enforced of the newest breaker decision, this window's included;
null before the first): the record of every window that tells a reader (the scaling job) that the
breaker's decisions up to that window are known, without waiting on the quiet breaker topic."""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass, field, replace

from stormwatch import breaker, retry_gate, retry_storm
from stormwatch.decisions import decision_id, envelope
from stormwatch.health import HealthInputs, score
from stormwatch.policy import Policy

HEALTH, BREAKER, RETRY_GATE, RETRY_STORM = "health", "breaker", "retry_gate", "retry_storm"
GATED_KINDS = ("service", "edge")
# The gate fields callers act on; a change in any of them is published.
GATE_FIELDS = ("max_retries", "base_delay_ms", "exponential", "jitter", "max_delay_ms", "tier")


@dataclass
class EntityState:
    breaker: breaker.BreakerState | None = None
    last_gate: tuple | None = None          # astuple() of the last published RetryGate
    sequences: dict[str, int] = field(default_factory=dict)
    # The newest breaker decision published (coordination.BREAKER_FIELDS), None before the first.
    breaker_decision: dict | None = None
    # Edges only: retry-storm state (stormwatch/retry_storm.py).
    storm: retry_storm.StormState | None = None


def _entity(inputs: HealthInputs) -> dict:
    fields = {"kind": inputs.entity_kind, "key": inputs.entity_key, "service": inputs.service,
              "instance": inputs.instance, "caller": inputs.caller, "callee": inputs.callee}
    return {k: v for k, v in fields.items() if v is not None}


def observe(state: EntityState | None, inputs: HealthInputs, policy: Policy) -> tuple[EntityState, list[dict]]:
    state = state or EntityState()
    sequences = dict(state.sequences)
    entity = _entity(inputs)

    def publish(decision_type: str, body: dict) -> dict:
        sequences[decision_type] = sequences.get(decision_type, 0) + 1
        return envelope(entity, decision_type, sequences[decision_type], inputs.window_start_ms,
                        inputs.window_end_ms, policy.version, body)

    health = score(inputs, policy.health)
    figures = {k: v for k, v in asdict(inputs).items()
               if k in ("calls", "errors", "p50_ms", "p95_ms", "p99_ms", "load_ratio")}
    body = {
        "status": health.status, "score": health.score, "error_rate": health.error_rate,
        "terms": health.terms, "weights": health.weights, "inputs": figures,
        "thresholds": {"min_calls": policy.health.min_calls, "latency_cap_ms": policy.health.latency_cap_ms,
                       "weights": dict(policy.health.weights)},
        "example_trace_ids": list(inputs.example_trace_ids),
    }
    if inputs.entity_kind not in GATED_KINDS:
        return (EntityState(state.breaker, state.last_gate, sequences, state.breaker_decision, state.storm),
                [publish(HEALTH, body)])

    observed = {"calls": inputs.calls, "errors": inputs.errors, "score": health.score,
                "error_rate": health.error_rate}
    step = breaker.step(state.breaker, breaker.BreakerObservation(
        inputs.window_start_ms, inputs.window_end_ms, inputs.calls, inputs.errors, health.score, inputs.entity_key),
        policy.breaker)
    breaker_decision = state.breaker_decision
    if step.changed:
        breaker_decision = {"decision_id": decision_id(entity["key"], BREAKER, inputs.window_end_ms, policy.version),
                            "state": step.state.state, "window_end_ms": inputs.window_end_ms,
                            "enforced": step.enforced}
    # The health record first, as before, naming the breaker as of this window's end.
    out = [publish(HEALTH, {**body, "breaker": breaker_decision})]
    if step.changed:
        out.append(publish(BREAKER, {
            "state": step.state.state, "previous_state": step.previous, "admitted_share": step.admitted_share,
            "max_probes": step.max_probes, "reason_code": step.reason_code, "inputs": observed,
            "thresholds": step.thresholds, "enforced": step.enforced,
        }))

    storm = None
    if inputs.entity_kind == "edge":
        storm = retry_storm.step(state.storm, retry_storm.StormObservation(
            inputs.window_end_ms, inputs.calls, inputs.errors, inputs.retries, inputs.logical_calls, inputs.p95_ms),
            policy.storm)
        if storm.changed:
            out.append(publish(RETRY_STORM, {
                "state": storm.state.state, "previous_state": storm.previous, "reason_code": storm.reason_code,
                "started_ms": storm.state.since_ms if storm.state.state == retry_storm.STORM
                else (state.storm.since_ms if state.storm else None),
                "ended_ms": inputs.window_end_ms if storm.state.state == retry_storm.CALM else None,
                "inputs": storm.inputs, "thresholds": storm.thresholds,
            }))

    previous = retry_gate.RetryGate(*state.last_gate) if state.last_gate else None
    window_s = policy.health.window_size_seconds
    g = retry_gate.gate(health.score, step.state.state, inputs.calls, window_s, policy.retry,
                        previous.tier if previous else None)
    in_storm = storm is not None and storm.state.state == retry_storm.STORM
    if in_storm:
        # The callers' retries follow the evidence: at most one, the budget divided by the amplification.
        g = replace(g, max_retries=min(g.max_retries, 1),
                    budget_retries=retry_storm.tightened_budget(g.budget_retries, storm.inputs["amplification"]),
                    reason_code=g.reason_code if g.reason_code.startswith("BREAKER_") else "RETRY_STORM")
    last_gate = state.last_gate
    if (previous is None or any(getattr(g, f) != getattr(previous, f) for f in GATE_FIELDS)
            or (storm is not None and storm.changed)):
        out.append(publish(RETRY_GATE, {
            **{k: v for k, v in asdict(g).items() if k != "tier"},
            "previous": {k: v for k, v in asdict(previous).items() if k != "tier"} if previous else None,
            "inputs": observed,
            "thresholds": {"tier": g.tier, "tier_min_scores": [t.min_score for t in policy.retry.tiers],
                           "budget_ratio": policy.retry.budget_ratio,
                           "min_retries_per_second": policy.retry.min_retries_per_second,
                           "window_seconds": window_s,
                           **({"storm_amplification": storm.inputs["amplification"]} if in_storm else {})},
        }))
        last_gate = astuple(g)
    return EntityState(step.state, last_gate, sequences, breaker_decision,
                       storm.state if storm is not None else state.storm), out
