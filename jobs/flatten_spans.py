"""flatten_spans: OTLP JSON trace messages on otlp_spans -> one row per span on stormwatch_spans.

All per-span work is Flink SQL on the JVM (sql/views/otlp_spans_flat.sql); malformed messages and
invalid spans go to the dead-letter topic with their reason.
"""

from __future__ import annotations

import sys

from connectors.kafka import table_options
from jobs.common import execute, parse_args, setup, source_options, topic_overrides
from stormwatch.flink_env import table_environment
from stormwatch.sqlfiles import load_statements

JOB = "flatten_spans"
TABLES = [
    "tables/otlp_spans",
    "tables/otlp_spans_raw",
    "tables/stormwatch_spans",
    "tables/stormwatch_dead_letters",
    "views/otlp_spans_flat",
]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    spans = config.section("pipeline", "spans")
    dead_letters = config.section("pipeline", "dead_letters")
    topics = {
        "source": spans["source_topic"],
        "sink": spans["sink_topic"],
        "dead_letters": dead_letters["topic"],
        **topic_overrides(args),
    }
    group = args.group_id or spans["consumer_group"]
    variables = {
        "source_topic": topics["source"],
        "source_options": table_options(config, topics["source"], **source_options(args, group)),
        "spans_options": table_options(config, topics["sink"]),
        "dead_letters_options": table_options(config, topics["dead_letters"]),
        "watermark_out_of_orderness_seconds": int(spans["watermark_out_of_orderness_seconds"]),
        "dead_letter_payload_max_chars": dead_letters["payload_max_chars"],
    }
    # The raw reader of the same topic keeps its own offsets: two readers must not share a group.
    raw_variables = {**variables, "source_options": table_options(
        config, topics["source"], **source_options(args, f"{group}-raw"))}

    t_env = table_environment(config, f"stormwatch-{JOB}")
    ddl = load_statements([t for t in TABLES if t != "tables/otlp_spans_raw"], variables)
    ddl += load_statements(["tables/otlp_spans_raw"], raw_variables)
    for statement in ddl:
        t_env.execute_sql(statement)
    inserts = t_env.create_statement_set()
    for statement in load_statements([f"jobs/{JOB}"], variables):
        inserts.add_insert_sql(statement)
    execute(t_env, inserts, args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
