"""scaling: per-instance health windows -> QPS–latency Pareto fronts and scaling decisions.

Reads the instance rows of stormwatch_instance_windows and the service breakers' decisions of
stormwatch_breaker_decisions (both the health job's output), keyed by service into one operator. A
service's window is complete once the watermark of both reaches its last millisecond (jobs/streams.py
WindowBuffer): its instances are gathered until then, and the whole window, with the service's breaker as of its end (stormwatch/coordination.py), is
one observation of the service, handed with the policy to stormwatch/scaling_control.py (its Pareto
front and scaling decision, coordinated with the breaker).
"""

from __future__ import annotations

import json
import sys

from pyflink.common import Row, Types
from pyflink.datastream import DataStream, KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.table.expressions import col, lit

from jobs.common import Inserts, define, parse_args, setup
from jobs.decision_stream import OBSERVATION, control, job_inputs, observations, published
from jobs.streams import WindowBuffer
from stormwatch import coordination
from stormwatch import policy as policies
from stormwatch.flink_env import stream_table_environment
from stormwatch.scaling_control import observe
from stormwatch.sqlfiles import load_statements

JOB = "scaling"
INPUTS = {"instance_windows": "stormwatch_instance_windows", "breaker_decisions": "scaling_breaker_decisions",
          "policy": "stormwatch_policy"}
FILES = [f"tables/{t}" for t in INPUTS.values()] + ["tables/stormwatch_dead_letters"]
# The payload key of a breaker decision among the instance rows of the operator's input.
BREAKER = "breaker_decision"
# Decision type -> the topic role it is published to.
SINKS = {"pareto_front": "pareto_fronts", "scaling": "scaling_decisions"}


class GatherWindows(KeyedProcessFunction):
    """Per service: the instance rows of each window, emitted together when the watermark passes it, with
    the service's breaker decision as of the window's end (its decisions kept as a timeline)."""

    def open(self, runtime_context):
        self.windows = WindowBuffer(runtime_context)
        self.breakers = runtime_context.get_state(ValueStateDescriptor("breakers", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        row = json.loads(value.payload)
        if BREAKER in row:
            self.breakers.update(coordination.record(self.breakers.value(), row[BREAKER]))
        else:
            self.windows.add(ctx, int(row["window_end_ms"]), row)
        return []

    def on_timer(self, timestamp, ctx):
        timeline = self.breakers.value()
        for end, rows in self.windows.closed(timestamp):
            service = rows[0]["service"]
            yield Row(entity_key=f"service:{service}", payload=json.dumps({
                "service": service, "window_start_ms": rows[0]["window_start_ms"], "window_end_ms": end,
                "instances": rows, "breaker": coordination.as_of(timeline, end)}))
        if timeline:
            self.breakers.update(coordination.forget_before(timeline, timestamp))


def breaker_decisions(t_env) -> DataStream:
    """The service breakers' decisions (edges' breakers are not a service's) as observations keyed as the
    instance rows are, by service, with the watermark of their topic."""
    rows = t_env.from_path("scaling_breaker_decisions").filter(
        (col("entity").get("kind") == lit("service")) & col("entity").get("service").is_not_null
        & col("state").is_not_null & col("decision_id").is_not_null
        & col("window_end_ms").is_not_null).select(
        col("entity").get("service").alias("service"), col("decision_id"), col("state"), col("window_end_ms"),
        col("enforced"), col("window_end_time"))
    return t_env.to_data_stream(rows).map(
        lambda r: Row(entity_key=r["service"], payload=json.dumps({BREAKER: coordination.breaker_of(
            {"decision_id": r["decision_id"], "state": r["state"], "window_end_ms": r["window_end_ms"],
             "enforced": r["enforced"]})})),
        output_type=OBSERVATION)


def step(state, observation: dict, policy: policies.Policy):
    state, decisions = observe(state, observation, policy)
    return state, published(decisions)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names, group, default, variables = job_inputs(args, config, JOB, INPUTS)
    variables["breaker_idle_timeout"] = f"{int(config.get('pipeline', JOB, 'breaker_idle_timeout_seconds'))} s"

    t_env = stream_table_environment(config, f"stormwatch-{JOB}", args.from_savepoint)
    define(t_env, load_statements(FILES, variables))
    # Service rows (`instance` NULL) are the health job's; fronts are made of instances.
    rows = t_env.from_path("stormwatch_instance_windows").filter(col("instance").is_not_null)
    windows = (observations(t_env.to_data_stream(rows), lambda r: r["service"])
               .union(breaker_decisions(t_env))
               .key_by(lambda o: o.entity_key, key_type=Types.STRING())
               .process(GatherWindows(), output_type=OBSERVATION))
    inserts = Inserts(t_env, config, group)
    control(t_env, windows, JOB, default, step, names["policy"], int(config.get("pipeline", "scaling", "state_ttl_days")),
            SINKS, variables, inserts)
    inserts.execute(args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
