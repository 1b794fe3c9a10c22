"""spans: OTLP trace messages on otlp_spans -> per-window service edges, service figures, error breaks,
latency stages, per-instance span figures and ranked root-cause suspects, in one job; spans it cannot
use to the dead letters.

Per-span work runs once, on the JVM: each message is decoded and its spans validated once, straight into
span records (io.stormwatch.flink.traces.SpanSource: the `otlp` format's decoder, checks and reasons, and
the watermark sql/tables/otlp_spans.sql declares, without its 18-column rows), then one keyed operator per trace id (io.stormwatch.flink.traces.TraceAssembler, udfs/traces/) holds
a trace's spans until it has been quiet for [pipeline.topology] trace_quiet_seconds of event time and
derives every per-trace fact in one pass (TraceFacts) into per-entity, per-slide-bucket partials with
mergeable histograms. Flink SQL merges the partials of each window (sql/jobs/spans.sql, spans_edges.sql),
and the suspects ranker (jobs/suspects.py `attach`) takes each window as it closes.
No pairwise interval join, no time bound beyond the trace's own: a trace's facts are placed at its end,
so a window's records leave once the watermark passes its end and the quiet time, whatever is still open.
"""

from __future__ import annotations

import sys

from pyflink.java_gateway import get_gateway
from pyflink.util.java_utils import add_jars_to_context_class_loader

from connectors.kafka import flink_options, partition_count
from connectors.otlp import SETTINGS
from jobs import suspects
from jobs.common import Inserts, add_statements, define, parse_args, setup, topics_and_group
from jobs.flatten_spans import source_settings
from stormwatch import catalog
from stormwatch.flink_env import job_jars, stream_table_environment
from stormwatch.sqlfiles import load_statements

JOB = "spans"
OUTPUTS = ["tables/stormwatch_edges", "tables/stormwatch_service_windows", "tables/stormwatch_error_breaks",
           "tables/stormwatch_latency_stages", "tables/stormwatch_span_instances"] + suspects.OUTPUTS


def span_variables(config, variables: dict) -> dict:
    """The edges' windows per kind, on top of the shared variables."""
    topology = config.section("pipeline", "topology")
    slide, size, tumbling = (int(topology[k]) for k in ("window_slide_seconds", "window_size_seconds",
                                                        "edge_tumbling_window_seconds"))
    # Windows are merged from slide buckets: every window must be a whole number of them.
    if size % slide or tumbling % slide:
        raise SystemExit(f"[pipeline.topology] window_size_seconds ({size}) and edge_tumbling_window_seconds "
                         f"({tumbling}) must be multiples of window_slide_seconds ({slide})")
    return {**variables, "latency_bucket_count": len(topology["latency_bucket_bounds_ms"]),
            "window_slide_ms": slide * 1000}


def marks_per_writer(topic: str, partitions: int, parallelism: int) -> int:
    """How many progress marks per slide boundary each of `parallelism` span-path subtasks writes to the
    per-instance figures (`topic`, `partitions` partitions), so each partition it owns gets one
    (io.stormwatch.flink.traces.WriterPartitioner). A partition with two writers would let one writer's
    figures fall behind the other's mark, and the health job's watermark (the latest mark per partition)
    would drop them: refused."""
    if partitions < parallelism:
        raise SystemExit(
            f"topic {topic} has {partitions} partition(s), fewer than the span path's parallelism ({parallelism}): "
            f"each span-path subtask writes its per-instance figures into partitions of its own. Add partitions "
            f"(kafka-topics.sh --alter --topic {topic} --partitions {parallelism}) or lower the parallelism")
    return -(-partitions // parallelism)


def progress_marks(t_env, config, topic: str) -> int:
    """marks_per_writer for this job's parallelism and the topic as it is on the broker (as configured
    to be created if it is not there yet)."""
    parallelism = t_env._j_tenv.execEnv().getParallelism()
    if parallelism < 1:
        parallelism = int(config.get("flink", "parallelism"))
    partitions = partition_count(config, topic) or int(config.topics.get(topic, {}).get("partitions", 1))
    return marks_per_writer(topic, partitions, parallelism)


def attach_trace_assembler(t_env, config, source_topic: str, source: dict[str, str], marks: int = 1) -> None:
    """The messages of `source_topic` (read with the Kafka table options `source`: group, startup and
    bounded mode, properties) decoded into span records and through the trace assembler, back as the
    views `trace_partials` and `trace_dead_letters` (io.stormwatch.flink.traces.SpanPath)."""
    topology = config.section("pipeline", "topology")
    spans = config.section("pipeline", "spans")
    add_jars_to_context_class_loader(job_jars(config))
    gateway = get_gateway()
    bounds = topology["latency_bucket_bounds_ms"]
    java_bounds = gateway.new_array(gateway.jvm.double, len(bounds))
    for i, b in enumerate(bounds):
        java_bounds[i] = float(b)
    options = gateway.jvm.java.util.LinkedHashMap()
    for key, value in flink_options(config, source_topic, **source).items():
        options.put(key, value)
    gateway.jvm.io.stormwatch.flink.traces.SpanPath.register(
        t_env._j_tenv, t_env._j_tenv.execEnv(), options,
        # As format 'otlp' takes them (sql/tables/otlp_spans.sql, the table flatten_spans reads).
        spans["encoding"], int(spans["future_limit_seconds"]),
        int(config.get("pipeline", "dead_letters", "payload_max_chars")),
        "trace_partials", "trace_dead_letters",
        int(float(topology["trace_quiet_seconds"]) * 1000), int(float(topology["trace_root_wait_seconds"]) * 1000),
        int(float(topology["max_follow_delay_seconds"]) * 1000),
        int(float(topology["trace_max_hold_seconds"]) * 1000), int(topology["window_slide_seconds"]) * 1000,
        java_bounds, source_topic, JOB,
        # The watermark otlp_spans declares: per Kafka partition, on the span's end.
        int(float(spans["watermark_out_of_orderness_seconds"]) * 1000),
        int(float(spans["idle_timeout_seconds"]) * 1000), marks)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    # The span path's own group: flatten_spans (the optional export of flattened spans) reads the same topic.
    names, group = topics_and_group(args, config, "topology")
    if config.get("pipeline", "spans", "encoding") not in SETTINGS:
        raise SystemExit(f"[pipeline.spans] encoding = {config.get('pipeline', 'spans', 'encoding')!r}: "
                         f"stormwatch reads {', '.join(SETTINGS)}")
    source = source_settings(config, args, group)
    variables = span_variables(config, catalog.variables(config, names, source))

    t_env = stream_table_environment(config, f"stormwatch-{JOB}", args.from_savepoint)
    # Each file once: the span path and the suspects' outputs share the dead letters.
    tables = ["functions/stormwatch_functions", "tables/stormwatch_dead_letters"] + OUTPUTS
    define(t_env, load_statements(list(dict.fromkeys(tables)), variables))
    attach_trace_assembler(t_env, config, names["source"], source,
                           progress_marks(t_env, config, names["span_instances"]))
    define(t_env, load_statements(["views/trace_partials"], variables))

    inserts = Inserts(t_env, config, group)
    statements = load_statements([f"jobs/{JOB}"], variables)
    tumbling = variables["edge_tumbling_window"]
    for kind, slide, size in (("sliding", variables["window_slide"], variables["window_size"]),
                              ("tumbling", tumbling, tumbling)):
        statements += load_statements(["jobs/spans_edges"], {**variables, "edge_window_kind": kind,
                                                             "edge_window_slide": slide, "edge_window_size": size})
    add_statements(t_env, inserts, statements)
    # Service windows and sliding edges: one stream each, to their topics and, the moment a window
    # closes, to the suspects ranker in this job graph (no Kafka hop). Each window aggregate is
    # planned once: a view read by an INSERT and by a DataStream would be planned twice.
    streams = {view: t_env.to_data_stream(t_env.from_path(view))
               for view in ("service_windows_out", "sliding_edges_out", "tumbling_edges_out")}
    inserts.table("stormwatch_service_windows", t_env.from_data_stream(streams["service_windows_out"]))
    inserts.table("stormwatch_edges", t_env.from_data_stream(
        streams["sliding_edges_out"].union(streams["tumbling_edges_out"])))
    suspects.attach(t_env, inserts, config, names, streams["service_windows_out"], streams["sliding_edges_out"])
    inserts.execute(args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
