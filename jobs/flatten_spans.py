"""flatten_spans: OTLP trace messages on otlp_spans -> one row per span on stormwatch_spans.

The messages are OTLP ExportTraceServiceRequests in the encoding [pipeline.spans] names: auto (each
message in the one it is in), or one of the Collector's kafka exporter's: otlp_json or otlp_proto. The source table
(sql/tables/otlp_spans.sql) decodes each message once, on the JVM, with stormwatch's `otlp` format
(connectors/java/, io.stormwatch.flink.otlp): one row per span, validated and named. Valid spans go to
stormwatch_spans; invalid spans and messages that do not decode go to the dead-letter topic with their
reason (sql/jobs/flatten_spans.sql).
"""

from __future__ import annotations

import sys

from connectors.otlp import SETTINGS
from jobs.common import parse_args, run_sql_job, setup, source_options, topics_and_group
from stormwatch import catalog
from stormwatch.sqlfiles import load_statements

JOB = "flatten_spans"


def tables(encoding: str) -> list[str]:
    """The SQL files of the job for messages in `encoding`: the decoded spans and the two outputs."""
    if encoding not in SETTINGS:
        raise SystemExit(f"[pipeline.spans] encoding = {encoding!r}: stormwatch reads {', '.join(SETTINGS)}")
    return ["tables/otlp_spans", "tables/stormwatch_spans", "tables/stormwatch_dead_letters"]


def source_settings(config, args, group: str) -> dict[str, str]:
    """How a job reads otlp_spans with consumer group `group`: startup and bounded mode, and the Kafka
    settings only this source needs (see [pipeline.spans.source_properties] for why)."""
    tuned = {f"properties.{k}": str(v) for k, v in config.section("pipeline", "spans", "source_properties").items()}
    return {**source_options(args, group), **tuned}


def source_variables(config, names: dict[str, str], args, group: str) -> dict:
    """The SQL variables of a job reading otlp_spans with consumer group `group`."""
    return catalog.variables(config, names, source_settings(config, args, group))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names, group = topics_and_group(args, config, "spans")
    variables = source_variables(config, names, args, group)
    statements = load_statements(tables(config.get("pipeline", "spans", "encoding")), variables)
    run_sql_job(config, JOB, statements, variables, args, group)


if __name__ == "__main__":
    main(sys.argv[1:])
