"""scaling: per-instance health windows -> QPS–latency Pareto fronts and scaling decisions.

Reads the instance rows of stormwatch_instance_windows (the health job's output). A service's window
is complete once the watermark passes its end: its instances are gathered until then, and the whole
window is one observation of the service, handed with the policy to stormwatch/scaling_control.py
(its Pareto front and scaling decision).
"""

from __future__ import annotations

import json
import sys

from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.table.expressions import col

from jobs.common import Inserts, define, parse_args, setup
from jobs.decision_stream import OBSERVATION, control, job_inputs, observations, published
from jobs.streams import WindowBuffer
from stormwatch import policy as policies
from stormwatch.flink_env import stream_table_environment
from stormwatch.scaling_control import observe
from stormwatch.sqlfiles import load_statements

JOB = "scaling"
INPUTS = {"instance_windows": "stormwatch_instance_windows", "policy": "stormwatch_policy"}
FILES = [f"tables/{t}" for t in INPUTS.values()] + ["tables/stormwatch_dead_letters"]
# Decision type -> the topic role it is published to.
SINKS = {"pareto_front": "pareto_fronts", "scaling": "scaling_decisions"}


class GatherWindows(KeyedProcessFunction):
    """Per service: the instance rows of each window, emitted together when the watermark passes it."""

    def open(self, runtime_context):
        self.windows = WindowBuffer(runtime_context)

    def process_element(self, value, ctx):
        row = json.loads(value.payload)
        self.windows.add(ctx, int(row["window_end_ms"]), row)
        return []

    def on_timer(self, timestamp, ctx):
        for end, rows in self.windows.closed(timestamp):
            service = rows[0]["service"]
            yield Row(entity_key=f"service:{service}", payload=json.dumps({
                "service": service, "window_start_ms": rows[0]["window_start_ms"], "window_end_ms": end,
                "instances": rows}))


def step(state, observation: dict, policy: policies.Policy):
    state, decisions = observe(state, observation, policy)
    return state, published(decisions)


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
