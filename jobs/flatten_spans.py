"""flatten_spans: OTLP trace messages on otlp_spans -> one row per span on stormwatch_spans.

The messages are OTLP ExportTraceServiceRequests in the encoding [pipeline.spans] names, as the
Collector's kafka exporter's `encoding`: otlp_json (Flink's JSON format) or otlp_proto (Flink's
protobuf format with the OTLP classes). All per-span work is Flink SQL on the JVM
(sql/views/otlp_span_rows_*.sql, sql/views/otlp_spans_flat.sql); messages that do not decode and
invalid spans go to the dead-letter topic with their reason.
"""

from __future__ import annotations

import sys

from jobs.common import parse_args, raw_reader, run_sql_job, setup, source_options, undecodable_messages
from stormwatch import catalog
from stormwatch.otlp_encoding import ENCODINGS
from stormwatch.sqlfiles import load_statements

JOB = "flatten_spans"


def tables(encoding: str) -> list[str]:
    """The SQL files of the job for messages in `encoding`."""
    if encoding not in ENCODINGS:
        raise SystemExit(f"[pipeline.spans] encoding = {encoding!r}: stormwatch reads {' or '.join(ENCODINGS)}")
    suffix = encoding.removeprefix("otlp_")
    # Java functions (jvm/functions/): judging undecodable messages, hex of protobuf's id bytes.
    return ["functions/stormwatch_functions", f"tables/otlp_spans_{suffix}", "tables/stormwatch_spans",
            "tables/stormwatch_dead_letters", f"views/otlp_span_rows_{suffix}", "views/otlp_spans_flat"]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names = catalog.topics(config, catalog.parse_topic_overrides(args.topic))
    group = args.group_id or config.get("pipeline", "spans", "consumer_group")
    encoding = config.get("pipeline", "spans", "encoding")
    # Kafka settings only this source needs: see [pipeline.spans.source_properties] for why.
    tuned = {f"properties.{k}": str(v) for k, v in config.section("pipeline", "spans", "source_properties").items()}
    variables = catalog.variables(config, names, {**source_options(args, group), **tuned})
    ddl = load_statements(tables(encoding), variables) + raw_reader(
        config, args, "otlp_spans_raw", names["source"], f"{group}-raw")
    run_sql_job(config, JOB, ddl, variables, args, group,
                undecodable_messages(variables, "otlp_spans_raw", names["source"], "resourceSpans", JOB, encoding))


if __name__ == "__main__":
    main(sys.argv[1:])
