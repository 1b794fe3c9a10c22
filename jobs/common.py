"""What every job's entry point shares: its command line, its configuration, running to completion."""

from __future__ import annotations

import argparse
import logging
import re
from collections import Counter

from pyflink.table import Table, TableEnvironment

from connectors.kafka import sql_options, table_options
from stormwatch.catalog import TOPIC_ROLES, parse_topic_overrides, topics
from stormwatch.config import Config, load
from stormwatch.flink_env import shared_job_graph, table_environment
from stormwatch.sqlfiles import load_statements


def parse_args(description: str, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", help="configuration file (default: $STORMWATCH_CONFIG or config/stormwatch.toml)")
    parser.add_argument(
        "--bounded",
        action="store_true",
        help="stop at the offsets that are the latest when the job starts (replays, backfills, tests)",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-earliest",
        action="store_true",
        help="read the input topics from the beginning instead of the consumer group's committed offsets",
    )
    start.add_argument(
        "--from-timestamp",
        type=int,
        metavar="EPOCH_MS",
        help="read the input topics from their first records written at or after this time (Kafka record "
             "timestamps, epoch ms) instead of the consumer group's committed offsets: what `stormwatch demo` "
             "does, so records of an earlier run are not read again",
    )
    # Override topic names from the configuration, e.g. to run against a test's own topics.
    parser.add_argument("--topic", action="append", default=[], metavar="ROLE=NAME",
                        help=f"use topic NAME for ROLE ({', '.join(TOPIC_ROLES)})")
    parser.add_argument("--group-id", help="consumer group id (default from the configuration)")
    parser.add_argument("--from-savepoint", metavar="PATH",
                        help="start from this savepoint or retained checkpoint (`stormwatch job stop` prints one)")
    return parser.parse_args(argv)


def topics_and_group(args: argparse.Namespace, config: Config, section: str) -> tuple[dict[str, str], str]:
    """A job's topic names (the configuration's, then its --topic ROLE=NAME) and its consumer group
    (--group-id, else [pipeline.<section>] consumer_group)."""
    names = topics(config, parse_topic_overrides(args.topic))
    return names, args.group_id or config.get("pipeline", section, "consumer_group")


def source_options(args: argparse.Namespace, group_id: str) -> dict[str, str]:
    options = {
        "properties.group.id": group_id,
        "scan.startup.mode": "earliest-offset" if args.from_earliest or args.bounded else "group-offsets",
        # A new group starts at the beginning of the topic: no span produced before the job is missed.
        "properties.auto.offset.reset": "earliest",
    }
    if getattr(args, "from_timestamp", None) is not None:
        options["scan.startup.mode"] = "timestamp"
        options["scan.startup.timestamp-millis"] = str(args.from_timestamp)
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


def undecodable_messages(variables: dict, raw_table: str, topic: str, otlp_array: str, job: str) -> list[str]:
    """The INSERT sending the messages of `raw_table` (of OTLP JSON `topic`) that cannot be the OTLP JSON
    request holding `otlp_array` to the dead letters, each with its reason (sql/jobs/not_otlp_json.sql).
    Trace messages need none: the `otlp` format judges them as it decodes them (sql/tables/otlp_spans.sql)."""
    return load_statements(["jobs/not_otlp_json"], {
        **variables, "raw_table": raw_table, "otlp_topic": topic, "otlp_array": otlp_array,
        "otlp_request": OTLP_REQUESTS[otlp_array], "job": job})


def setup(args: argparse.Namespace) -> Config:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return load(args.config)


class Inserts:
    """A job's INSERTs, run as one Flink job (a statement set: they share their sources), each into its
    Kafka sink with the delivery guarantee of [pipeline.delivery].

    An exactly-once sink writes in Kafka transactions named by a prefix that must be unique on the
    broker to that one sink, and the same when the job restarts: the restarted sink aborts what its
    predecessor left open, which would otherwise hold every read_committed reader of the topic back
    until the broker times it out. The prefix is the job's consumer group (one per deployed job), the
    table, and a count for a table written by several INSERTs; it goes on the INSERT as a hint."""

    def __init__(self, t_env: TableEnvironment, config: Config, group: str):
        self.t_env = t_env
        self.statements = t_env.create_statement_set()
        self.delivery = config.section("pipeline", "delivery")
        self.group = group
        self.written: Counter[str] = Counter()

    def sql(self, statement: str) -> None:
        table = inserted_table(statement)
        self.written[table] += 1
        options = {"sink.delivery-guarantee": self.delivery["guarantee"]}
        if self.delivery["guarantee"] == "exactly-once":
            options["sink.transactional-id-prefix"] = f"{self.group}.{table}.{self.written[table]}"
            options["properties.transaction.timeout.ms"] = str(self.delivery["transaction_timeout_ms"])
        self.statements.add_insert_sql(with_sink_options(statement, options))

    def table(self, sink: str, rows: Table) -> None:
        """INSERT the rows of a Table (a DataStream's, say) into the table `sink`."""
        view = f"{sink}_input_{self.written[sink] + 1}"
        self.t_env.create_temporary_view(view, rows)
        self.sql(f"INSERT INTO `{sink}` SELECT * FROM `{view}`")

    def execute(self, bounded: bool) -> None:
        """Submit, then wait: a local job lives in this process; `flink run -d` returns at once. Inside
        flink_env.one_job_graph, add the statements to the shared job graph; its owner executes it."""
        if shared_job_graph():
            self.statements.attach_as_datastream()
            return
        result = self.statements.execute()
        attached = self.t_env.get_config().get("execution.attached", "true").lower() != "false"
        job = result.get_job_client()
        logging.getLogger("stormwatch").info("submitted job %s", job.get_job_id() if job else "?")
        if attached or bounded:
            result.wait()


# The table an INSERT writes: the first INSERT INTO at the start of a line (not in a comment).
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(`?)(\w+)\1", re.M | re.I)


def _insert(statement: str) -> re.Match:
    match = _INSERT.search(statement)
    if not match:
        raise ValueError(f"not an INSERT INTO a table: {statement[:200]!r}")
    return match


def inserted_table(statement: str) -> str:
    return _insert(statement).group(2)


def with_sink_options(statement: str, options: dict[str, str]) -> str:
    """The INSERT with `options` on its sink table, as a hint: INSERT INTO t /*+ OPTIONS(...) */ ..."""
    end = _insert(statement).end()
    return f"{statement[:end]} /*+ OPTIONS({sql_options(options)}) */{statement[end:]}"


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


def add_statements(t_env: TableEnvironment, inserts: Inserts, statements: list[str]) -> None:
    """A job file's statements in order: its views defined (`define`), its INSERTs added to `inserts`."""
    for statement in statements:
        if _INSERT.search(statement):
            inserts.sql(statement)
        else:
            define(t_env, [statement])


def run_sql_job(config: Config, job: str, ddl: list[str], variables: dict, args: argparse.Namespace, group: str,
                more_inserts: list[str] = ()) -> None:
    """A job that is all SQL: its tables and views (`ddl`, rendered), then the INSERTs of
    sql/jobs/<job>.sql and `more_inserts` as one statement set, so they share sources and run as one
    Flink job."""
    t_env = table_environment(config, f"stormwatch-{job}", args.from_savepoint)
    define(t_env, ddl)
    inserts = Inserts(t_env, config, group)
    for statement in load_statements([f"jobs/{job}"], variables) + list(more_inserts):
        inserts.sql(statement)
    inserts.execute(args.bounded)
