"""flatten_spans: OTLP JSON trace messages on otlp_spans -> one row per span on stormwatch_spans.

All per-span work is Flink SQL on the JVM (sql/views/otlp_spans_flat.sql); malformed messages and
invalid spans go to the dead-letter topic with their reason.
"""

from __future__ import annotations

import sys

from jobs.common import not_otlp_json, parse_args, raw_reader, run_sql_job, setup, source_options
from stormwatch import catalog
from stormwatch.sqlfiles import load_statements

JOB = "flatten_spans"
TABLES = [
    "tables/otlp_spans",
    "tables/stormwatch_spans",
    "tables/stormwatch_dead_letters",
    "views/otlp_spans_flat",
]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names = catalog.topics(config, catalog.parse_topic_overrides(args.topic))
    group = args.group_id or config.get("pipeline", "spans", "consumer_group")
    # Kafka settings only this source needs: see [pipeline.spans.source_properties] for why.
    tuned = {f"properties.{k}": str(v) for k, v in config.section("pipeline", "spans", "source_properties").items()}
    variables = catalog.variables(config, names, {**source_options(args, group), **tuned})
    ddl = load_statements(TABLES, variables) + raw_reader(config, args, "otlp_spans_raw", names["source"], f"{group}-raw")
    run_sql_job(config, JOB, ddl, variables, args.bounded,
                not_otlp_json(variables, "otlp_spans_raw", names["source"], "resourceSpans", JOB))


if __name__ == "__main__":
    main(sys.argv[1:])
