"""What every job's entry point shares: its command line, its configuration, running to completion."""

from __future__ import annotations

import argparse
import logging
import re

from pyflink.table import StatementSet, TableEnvironment

from connectors.kafka import table_options
from stormwatch.catalog import TOPIC_ROLES
from stormwatch.config import Config, load
from stormwatch.flink_env import table_environment
from stormwatch.sqlfiles import load_statements


def parse_args(description: str, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", help="configuration file (default: $STORMWATCH_CONFIG or config/stormwatch.toml)")
    parser.add_argument(
        "--bounded",
        action="store_true",
        help="stop at the offsets that are the latest when the job starts (replays, backfills, tests)",
    )
    parser.add_argument(
        "--from-earliest",
        action="store_true",
        help="read the input topics from the beginning instead of the consumer group's committed offsets",
    )
    # Override topic names from the configuration, e.g. to run against a test's own topics.
    parser.add_argument("--topic", action="append", default=[], metavar="ROLE=NAME",
                        help=f"use topic NAME for ROLE ({', '.join(TOPIC_ROLES)})")
    parser.add_argument("--group-id", help="consumer group id (default from the configuration)")
    return parser.parse_args(argv)


def source_options(args: argparse.Namespace, group_id: str) -> dict[str, str]:
    options = {
        "properties.group.id": group_id,
        "scan.startup.mode": "earliest-offset" if args.from_earliest or args.bounded else "group-offsets",
        # A new group starts at the beginning of the topic: no span produced before the job is missed.
        "properties.auto.offset.reset": "earliest",
    }
    if args.bounded:
        options["scan.bounded.mode"] = "latest-offset"
    return options


# The array of each OTLP request a JSON message must hold, and the request it is then.
OTLP_REQUESTS = {"resourceSpans": "ExportTraceServiceRequest", "resourceMetrics": "ExportMetricsServiceRequest"}


def raw_reader(config: Config, args: argparse.Namespace, table: str, topic: str, group_id: str) -> list[str]:
    """DDL of `table`: the messages of `topic` as text (sql/tables/raw_messages.sql). It keeps its own
    offsets: two readers of one topic must not share a consumer group."""
    options = table_options(config, topic, **source_options(args, group_id))
    return load_statements(["tables/raw_messages"], {"raw_table": table, "raw_options": options})


def undecodable_messages(variables: dict, raw_table: str, topic: str, otlp_array: str, job: str,
                         encoding: str = "otlp_json") -> list[str]:
    """The INSERT sending the messages of `raw_table` (of OTLP `topic`) that cannot be the topic's
    `encoding` of the request holding `otlp_array` to the dead letters, each with its reason
    (sql/jobs/not_otlp_json.sql, sql/jobs/not_otlp_proto.sql)."""
    return load_statements([f"jobs/not_{encoding}"], {
        **variables, "raw_table": raw_table, "otlp_topic": topic, "otlp_array": otlp_array,
        "otlp_request": OTLP_REQUESTS[otlp_array], "job": job})


def setup(args: argparse.Namespace) -> Config:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return load(args.config)


def execute(t_env: TableEnvironment, statements: StatementSet, bounded: bool) -> None:
    """Submit, then wait: a local job lives in this process; `flink run -d` returns at once."""
    result = statements.execute()
    attached = t_env.get_config().get("execution.attached", "true").lower() != "false"
    job = result.get_job_client()
    logging.getLogger("stormwatch").info("submitted job %s", job.get_job_id() if job else "?")
    if attached or bounded:
        result.wait()


_VIEW = re.compile(r"^CREATE TEMPORARY VIEW (\w+) AS", re.M)


def define(t_env: TableEnvironment, statements: list[str]) -> None:
    """Run a job's DDL: tables, functions, views. Each view becomes one plan every query reading it
    shares. A view defined in SQL is expanded anew in each INSERT, and the planner then computes it
    once per INSERT, each copy with its own state and shuffles: topology ran its deduplication 14
    times and its span-parent interval join 5 times, flatten_spans its UNNEST twice. Re-registered as
    the Table of its query, a view is one node of the job's graph, computed once."""
    for statement in statements:
        t_env.execute_sql(statement)
        match = _VIEW.search(statement)
        if match:
            table = t_env.sql_query(f"SELECT * FROM `{match.group(1)}`")
            t_env.drop_temporary_view(match.group(1))
            t_env.create_temporary_view(match.group(1), table)


def run_sql_job(config: Config, job: str, ddl: list[str], variables: dict, bounded: bool,
                more_inserts: list[str] = ()) -> None:
    """A job that is all SQL: its tables and views (`ddl`, rendered), then the INSERTs of
    sql/jobs/<job>.sql and `more_inserts` as one statement set, so they share sources and run as one
    Flink job."""
    t_env = table_environment(config, f"stormwatch-{job}")
    define(t_env, ddl)
    inserts = t_env.create_statement_set()
    for statement in load_statements([f"jobs/{job}"], variables) + list(more_inserts):
        inserts.add_insert_sql(statement)
    execute(t_env, inserts, bounded)
