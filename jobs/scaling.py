"""scaling: per-instance health windows -> QPS–latency Pareto fronts and scaling decisions.

Reads the instance rows of stormwatch_instance_windows (the health job's output). A service's window
is complete once the watermark passes its end: its instances are gathered until then, and the whole
window is one observation of the service, handed with the policy to stormwatch/pareto.py and
stormwatch/scaling.py.
"""

from __future__ import annotations

import json
import sys

from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.state import MapStateDescriptor
from pyflink.table.expressions import col

from jobs.common import Inserts, define, parse_args, setup
from jobs.decision_stream import OBSERVATION, control, job_inputs, observations
from stormwatch import policy as policies
from stormwatch.decisions import encode, envelope
from stormwatch.flink_env import stream_table_environment
from stormwatch.observations import instance_points
from stormwatch.pareto import front
from stormwatch.scaling import step as scale
from stormwatch.sqlfiles import load_statements

JOB = "scaling"
INPUTS = {"instance_windows": "stormwatch_instance_windows", "policy": "stormwatch_policy"}
FILES = [f"tables/{t}" for t in INPUTS.values()] + ["tables/stormwatch_dead_letters"]
# Decision type -> the topic role it is published to.
SINKS = {"pareto_front": "pareto_fronts", "scaling": "scaling_decisions"}


class GatherWindows(KeyedProcessFunction):
    """Per service: the instance rows of each window, emitted together when the watermark passes it."""

    def open(self, runtime_context):
        self.pending = runtime_context.get_map_state(
            MapStateDescriptor("pending", Types.LONG(), Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        row = json.loads(value.payload)
        end = int(row["window_end_ms"])
        rows = self.pending.get(end) or []
        rows.append(row)
        self.pending.put(end, rows)
        ctx.timer_service().register_event_time_timer(end)
        return []

    def on_timer(self, timestamp, ctx):
        for end in sorted(k for k in self.pending.keys() if k <= timestamp):
            rows = self.pending.get(end)
            self.pending.remove(end)
            service = rows[0]["service"]
            yield Row(entity_key=f"service:{service}", payload=json.dumps({
                "service": service, "window_start_ms": rows[0]["window_start_ms"], "window_end_ms": end,
                "instances": rows}))


def step(state, observation: dict, policy: policies.Policy):
    """One service window -> its front (every window) and a scaling decision (when it changes)."""
    first_seen, scaler, sequences = state or ({}, None, {})
    start, end, service = observation["window_start_ms"], observation["window_end_ms"], observation["service"]
    for row in observation["instances"]:
        first_seen.setdefault(row["instance"], int(row["window_start_ms"]))
    points = instance_points(observation["instances"], (end - start) / 1000, policy.pareto.latency_quantile, first_seen)
    current = front(service, start, end, points, policy.pareto)
    scaler, body = scale(scaler, current, len(points), policy.scaling)
    entity = {"kind": "service", "key": f"service:{service}", "service": service}
    outputs = []
    for decision_type, payload in (("pareto_front", current.to_dict()), ("scaling", body)):
        if payload is None:
            continue
        sequences[decision_type] = sequences.get(decision_type, 0) + 1
        record = envelope(entity, decision_type, sequences[decision_type], start, end, policy.version, payload)
        outputs.append((decision_type, entity["key"], encode(record)))
    return (first_seen, scaler, sequences), outputs


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names, group, default, variables = job_inputs(args, config, JOB, INPUTS)

    t_env = stream_table_environment(config, f"stormwatch-{JOB}", args.from_savepoint)
    define(t_env, load_statements(FILES, variables))
    # Service rows (`instance` NULL) are the health job's; fronts are made of instances.
    rows = t_env.from_path("stormwatch_instance_windows").filter(col("instance").is_not_null)
    windows = (observations(t_env.to_data_stream(rows), lambda r: r["service"])
               .key_by(lambda o: o.entity_key, key_type=Types.STRING())
               .process(GatherWindows(), output_type=OBSERVATION))
    inserts = Inserts(t_env, config, group)
    control(t_env, windows, JOB, default, step, names["policy"], int(config.get("pipeline", "scaling", "state_ttl_days")),
            SINKS, variables, inserts)
    inserts.execute(args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
