"""One service's decisions per window of its instances: its QPS–latency Pareto front, every window, and
a scaling decision, when it changes. The twin of entity_control.py for the scaling job: called by
jobs/scaling.py once per service window with the state it returned last time (jobs/decision_stream.py
keeps it in Flink state); returns the decisions to publish, enveloped.

The state is (when each instance was first seen, the scaler's state, the sequence number of each
decision type): an instance's first window starts its warm-up (stormwatch/pareto.py), and every
decision type numbers its records per service from 1.

An observation is a service window as jobs/scaling.py gathers it: `service`, `window_start_ms`,
`window_end_ms` and `instances`, the instance rows of stormwatch_instance_windows of that window, and
`breaker`: the service's breaker decision as of the window's end (stormwatch/coordination.py's
breaker_of), absent or None when it has none. The scaling decision is coordinated with it.
"""

from __future__ import annotations

from stormwatch.coordination import error_rate
from stormwatch.decisions import envelope
from stormwatch.observations import instance_points
from stormwatch.pareto import front
from stormwatch.policy import Policy
from stormwatch.scaling import ScalingState
from stormwatch.scaling import step as scale

PARETO_FRONT, SCALING = "pareto_front", "scaling"

State = tuple[dict[str, int], ScalingState | None, dict[str, int]]


def observe(state: State | None, observation: dict, policy: Policy) -> tuple[State, list[dict]]:
    """One service window -> its front (every window) and a scaling decision (when it changes)."""
    first_seen, scaler, sequences = state or ({}, None, {})
    start, end, service = observation["window_start_ms"], observation["window_end_ms"], observation["service"]
    for row in observation["instances"]:
        first_seen.setdefault(row["instance"], int(row["window_start_ms"]))
    points = instance_points(observation["instances"], (end - start) / 1000, policy.pareto.latency_quantile, first_seen)
    current = front(service, start, end, points, policy.pareto)
    scaler, body = scale(scaler, current, len(points), policy.scaling, observation.get("breaker"),
                         error_rate(observation["instances"]))
    entity = {"kind": "service", "key": f"service:{service}", "service": service}
    out = []
    for decision_type, payload in ((PARETO_FRONT, current.to_dict()), (SCALING, body)):
        if payload is None:
            continue
        sequences[decision_type] = sequences.get(decision_type, 0) + 1
        out.append(envelope(entity, decision_type, sequences[decision_type], start, end, policy.version, payload))
    return (first_seen, scaler, sequences), out
