"""health: instances' SERVER-span figures, instance metrics and edges -> health scores, breaker and retry
decisions.

The span figures come per instance and slide bucket from the span path (jobs/spans.py,
stormwatch_span_instances), so no job reads flattened spans on the way to a decision.

Instance metrics come native (stormwatch_instance_metrics) or as OTLP from the Collector (otlp_metrics,
folded into native records by sql/views/otlp_instance_metrics.sql). Flink SQL merges spans and metrics into per instance and per service windows of the policy's size
(sql/views/instance_windows.sql, published to stormwatch_instance_windows for the scaling job); edges
come from the span path (jobs/spans.py). Each window record is one observation of one entity, keyed by entity and
handed with the policy (broadcast from the policy topic) to stormwatch/entity_control.py.
"""

from __future__ import annotations

import sys

from jobs.common import Inserts, define, parse_args, raw_reader, setup, undecodable_messages
from jobs.decision_stream import control, job_inputs, observations, policy_key, published
from stormwatch import catalog, policy as policies
from stormwatch.entity_control import observe
from stormwatch.flink_env import stream_table_environment
from stormwatch.observations import health_inputs, window_entity_key
from stormwatch.sqlfiles import load_statements
from udfs.histograms import cumulative_buckets

JOB = "health"
# Tables read (by topic role) and the files that define them and what is computed on the JVM.
INPUTS = {"span_instances": "stormwatch_span_instances", "metrics": "stormwatch_instance_metrics", "otlp_metrics": "otlp_metrics",
          "edges": "stormwatch_edges", "policy": "stormwatch_policy"}
FILES = ["functions/stormwatch_functions"] + [f"tables/{t}" for t in INPUTS.values()] + [
    "tables/stormwatch_instance_windows", "tables/stormwatch_dead_letters",
    "views/otlp_metrics_flat", "views/otlp_instance_metrics", "views/instance_metrics_checked", "views/instance_facts",
    "views/instance_windows", "views/sliding_edges",
]
# Decision type -> the topic role it is published to.
SINKS = {"health": "health", "breaker": "breaker_decisions", "retry_gate": "retry_decisions",
         "retry_storm": "storm_decisions"}


def step(state, observation: dict, policy):
    state, decisions = observe(state, health_inputs(observation), policy)
    return state, published(decisions)


def health_variables(config, names: dict[str, str], default: policies.Policy) -> dict[str, object]:
    """What the health SQL needs beyond the shared variables: the policy's windows, the histogram."""
    bounds = config.get("pipeline", "topology", "latency_bucket_bounds_ms")
    # The span figures come in buckets of the span path's slide: a health window must be whole buckets.
    slide = int(config.get("pipeline", "topology", "window_slide_seconds"))
    for key in ("window_size_seconds", "window_slide_seconds"):
        if int(getattr(default.health, key)) % slide:
            raise SystemExit(f"policy [health] {key} = {getattr(default.health, key)}: must be a multiple of "
                             f"[pipeline.topology] window_slide_seconds ({slide}), the span path's buckets")
    return {
        "metrics_topic": names["metrics"],
        "otlp_metrics_topic": names["otlp_metrics"],
        "idle_timeout": f"{int(config.get('pipeline', 'health', 'idle_timeout_seconds'))} s",
        "latency_bucket_count": len(bounds),
        "health_window_size": catalog.interval(default.health.window_size_seconds),
        "health_window_slide": catalog.interval(default.health.window_slide_seconds),
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names, group, default, variables = job_inputs(args, config, JOB, INPUTS)
    variables |= health_variables(config, names, default)
    # Each metrics topic also as text, for the messages that are not JSON at all.
    raw_tables = (raw_reader(config, args, "stormwatch_instance_metrics_raw", names["metrics"], f"{group}-metrics-raw")
                  + raw_reader(config, args, "otlp_metrics_raw", names["otlp_metrics"], f"{group}-otlp_metrics-raw"))

    t_env = stream_table_environment(config, f"stormwatch-{JOB}", args.from_savepoint)
    t_env.create_temporary_function("cumulative_buckets", cumulative_buckets)
    define(t_env, load_statements(FILES, variables) + raw_tables)
    inserts = Inserts(t_env, config, group)
    for statement in load_statements([f"jobs/{JOB}"], variables) + undecodable_messages(
            variables, "otlp_metrics_raw", names["otlp_metrics"], "resourceMetrics", JOB):
        inserts.sql(statement)

    windows = t_env.to_data_stream(t_env.from_path("instance_windows"))
    # Computed once: the same rows go to their topic and on to the decisions.
    inserts.table("stormwatch_instance_windows", t_env.from_data_stream(windows))
    observed = observations(windows, window_entity_key).union(
        observations(t_env.to_data_stream(t_env.from_path("sliding_edges")), window_entity_key))
    control(t_env, observed, JOB, default, step, names["policy"], int(config.get("pipeline", "health", "state_ttl_days")),
            SINKS, variables, inserts, signing_key=policy_key(config, JOB))
    inserts.execute(args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
