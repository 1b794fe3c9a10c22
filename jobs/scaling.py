"""scaling: per-instance health windows -> QPS–latency Pareto fronts and scaling decisions.

Reads the instance rows of stormwatch_instance_windows and the services' health records of
stormwatch_health (both the health job's output), keyed by service into one operator. A service's
health record of a window names its breaker as of that window's end (stormwatch/entity_control.py), so
it says the breaker's decisions up to that window are known. A service's window is decided once the
watermark has reached its last millisecond (its instance rows are all there: jobs/streams.py
WindowBuffer) and the service's health record of that window (or a later one) has come: the whole
window, with the service's breaker as of its end (stormwatch/coordination.py), is one observation of
the service, handed with the policy to stormwatch/scaling_control.py (its Pareto front and scaling
decision, coordinated with the breaker). So no window is decided before its breaker is known, however
quiet the breaker topic is. An instance row of a window already decided (or that the watermark has
passed) goes to the dead letters with the reason: a window is decided once.
"""

from __future__ import annotations

import json
import sys

from pyflink.common import Row, Types
from pyflink.datastream import DataStream, KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.table.expressions import col, lit

from jobs.common import Inserts, define, parse_args, setup
from jobs.decision_stream import OBSERVATION, control, job_inputs, observations, policy_key, published
from jobs.streams import DEAD_LETTERS, WindowBuffer
from stormwatch import coordination
from stormwatch import policy as policies
from stormwatch.flink_env import stream_table_environment
from stormwatch.scaling_control import observe
from stormwatch.sqlfiles import load_statements

JOB = "scaling"
INPUTS = {"instance_windows": "stormwatch_instance_windows", "health": "scaling_service_health",
          "policy": "stormwatch_policy"}
FILES = [f"tables/{t}" for t in INPUTS.values()] + ["tables/stormwatch_dead_letters"]
# The payload key of a service's breaker as of a window (from its health record) among the instance rows
# of the operator's input: {"window_end_ms": the health record's window, "breaker": breaker_of or None}.
BREAKER = "breaker_as_of"
# Decision type -> the topic role it is published to.
SINKS = {"pareto_front": "pareto_fronts", "scaling": "scaling_decisions"}


class GatherWindows(KeyedProcessFunction):
    """Per service: the instance rows of each window, emitted together once the watermark has passed the
    window and the service's breaker is known through it (its health record of that window or a later
    one has come), with the breaker as of the window's end (its decisions kept as a timeline). A row
    of a window already emitted or passed by the watermark goes to the dead letters."""

    def __init__(self, instance_topic: str):
        self.instance_topic = instance_topic

    def open(self, runtime_context):
        self.windows = WindowBuffer(runtime_context)
        self.breakers = runtime_context.get_state(ValueStateDescriptor("breakers", Types.PICKLED_BYTE_ARRAY()))
        # The newest window end whose breaker is known (the service's health record of it has come).
        self.known_through = runtime_context.get_state(ValueStateDescriptor("known_through", Types.LONG()))

    def process_element(self, value, ctx):
        row = json.loads(value.payload)
        if BREAKER in row:
            known = row[BREAKER]
            if known["breaker"] is not None:
                self.breakers.update(coordination.record(self.breakers.value(), known["breaker"]))
            through = self.known_through.value()
            self.known_through.update(max(int(known["window_end_ms"]), through if through is not None else -2**63))
            # Windows the watermark passed while their breaker was not known yet leave now.
            yield from self._emit(ctx.timer_service().current_watermark())
            return
        reason = self.windows.add(ctx, int(row["window_end_ms"]), row)
        if reason is not None:
            yield DEAD_LETTERS, Row(self.instance_topic, row.get("kafka_partition"), row.get("kafka_offset"),
                                    f"scaling: {reason}", value.payload, JOB)

    def on_timer(self, timestamp, ctx):
        yield from self._emit(timestamp)

    def _emit(self, watermark: int):
        through = self.known_through.value()
        if through is None:
            return
        timeline = self.breakers.value()
        last = None
        for end, rows in self.windows.closed(watermark, through):
            service = rows[0]["service"]
            last = end
            yield Row(entity_key=f"service:{service}", payload=json.dumps({
                "service": service, "window_start_ms": rows[0]["window_start_ms"], "window_end_ms": end,
                "instances": rows, "breaker": coordination.as_of(timeline, end)}))
        if timeline and last is not None:
            self.breakers.update(coordination.forget_before(timeline, last))


def breakers_as_of(t_env) -> DataStream:
    """The services' health records (edges' breakers are not a service's) as the breaker of each service
    as of each window, keyed as the instance rows are, by service, with the watermark of their topic."""
    rows = t_env.from_path("scaling_service_health").filter(
        (col("entity").get("kind") == lit("service")) & col("entity").get("service").is_not_null
        & col("window_end_ms").is_not_null).select(
        col("entity").get("service").alias("service"), col("window_end_ms"),
        col("breaker").get("decision_id").alias("decision_id"), col("breaker").get("state").alias("state"),
        col("breaker").get("window_end_ms").alias("breaker_window_end_ms"),
        col("breaker").get("enforced").alias("enforced"), col("window_end_time"))
    return t_env.to_data_stream(rows).map(
        lambda r: Row(entity_key=r["service"], payload=json.dumps({BREAKER: {
            "window_end_ms": r["window_end_ms"], "breaker": breaker_named(r.as_dict())}})),
        output_type=OBSERVATION)


def breaker_named(record: dict) -> dict | None:
    """The breaker a service's health record names (its fields flattened: decision_id, state,
    breaker_window_end_ms, enforced) as coordination reads it; None when it names none."""
    if any(record.get(k) is None for k in ("decision_id", "state", "breaker_window_end_ms")):
        return None
    return coordination.breaker_of({"decision_id": record["decision_id"], "state": record["state"],
                                    "window_end_ms": record["breaker_window_end_ms"], "enforced": record.get("enforced")})


def step(state, observation: dict, policy: policies.Policy):
    state, decisions = observe(state, observation, policy)
    return state, published(decisions)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names, group, default, variables = job_inputs(args, config, JOB, INPUTS)
    variables["health_idle_timeout"] = f"{int(config.get('pipeline', JOB, 'health_idle_timeout_seconds'))} s"

    t_env = stream_table_environment(config, f"stormwatch-{JOB}", args.from_savepoint)
    define(t_env, load_statements(FILES, variables))
    # Service rows (`instance` NULL) are the health job's; fronts are made of instances.
    rows = t_env.from_path("stormwatch_instance_windows").filter(col("instance").is_not_null)
    windows = (observations(t_env.to_data_stream(rows), lambda r: r["service"])
               .union(breakers_as_of(t_env))
               .key_by(lambda o: o.entity_key, key_type=Types.STRING())
               .process(GatherWindows(names["instance_windows"]), output_type=OBSERVATION))
    inserts = Inserts(t_env, config, group)
    inserts.table("stormwatch_dead_letters", t_env.from_data_stream(windows.get_side_output(DEAD_LETTERS)))
    control(t_env, windows, JOB, default, step, names["policy"], int(config.get("pipeline", "scaling", "state_ttl_days")),
            SINKS, variables, inserts, signing_key=policy_key(config, JOB))
    inserts.execute(args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
