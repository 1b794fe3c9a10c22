"""topology: stormwatch_spans -> per-window service edges, service figures, error breaks and latency
stages; late spans to the dead letters.

Every per-span step is Flink SQL on the JVM: an interval join of each span with its parent
(sql/views/span_parents.sql), one with the children of CLIENT spans (untraced_calls), and windowed
aggregates with percentiles and histogram buckets (sql/jobs/topology.sql; edges, in sliding and in
tumbling windows, sql/jobs/topology_edges.sql).
"""

from __future__ import annotations

import sys

from jobs.common import parse_args, run_sql_job, setup, source_options
from stormwatch import catalog
from stormwatch.sqlfiles import load_statements

JOB = "topology"
TABLES = [
    "tables/stormwatch_spans",
    "tables/stormwatch_edges",
    "tables/stormwatch_service_windows",
    "tables/stormwatch_error_breaks",
    "tables/stormwatch_latency_stages",
    "tables/stormwatch_dead_letters",
    "views/unique_spans",
    "views/span_parents",
    "views/span_pairs",
    "views/untraced_calls",
    "views/span_links",
    "views/edge_calls",
    "views/child_coverage",
    "views/service_facts",
    "views/span_self_times",
]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names = catalog.topics(config, catalog.parse_topic_overrides(args.topic))
    group = args.group_id or config.get("pipeline", "topology", "consumer_group")
    # Its input is flatten_spans' output: the table of the `sink` role, read here.
    reading = source_options(args, group)
    variables = catalog.variables(config, names, reading, read_with={"sink": reading})

    # Edges twice: in the sliding windows of every other output, and in tumbling ones.
    tumbling = variables["edge_tumbling_window"]
    edges = []
    for kind, slide, size in (("sliding", variables["window_slide"], variables["window_size"]),
                              ("tumbling", tumbling, tumbling)):
        edges += load_statements(["jobs/topology_edges"], {**variables, "edge_window_kind": kind,
                                                           "edge_window_slide": slide, "edge_window_size": size})
    run_sql_job(config, JOB, load_statements(TABLES, variables), variables, args, group, edges)


if __name__ == "__main__":
    main(sys.argv[1:])
