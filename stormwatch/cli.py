"""`stormwatch`: run the local Kafka and Flink, create topics, run jobs, replay data, watch topics."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from stormwatch import job_registry
from stormwatch.config import ConfigError, load
from stormwatch.traffic.schedule import preset_names


def _services(config):
    from stormwatch.runtime.flink_cluster import FlinkCluster
    from stormwatch.runtime.kafka_broker import KafkaBroker

    return {"kafka": KafkaBroker(config), "flink": FlinkCluster(config)}


def cmd_service(args) -> None:
    service = _services(load(args.config))[args.service]
    print(getattr(service, args.action)())


def cmd_topics(args) -> None:
    from connectors.kafka import admin, create_topics

    config = load(args.config)
    if args.action == "create":
        print("\n".join(create_topics(config)))
    else:
        with admin(config) as client:
            print("\n".join(sorted(t for t in client.list_topics() if not t.startswith("__"))))


def cmd_run(args) -> None:
    config = load(args.config)
    jobs = list(dict.fromkeys(args.jobs))
    for job in jobs:
        job_registry.path(job)  # an unknown job is an error before anything starts
    job_args = ["--config", str(config.path), *args.job_args]
    if args.cluster:
        from stormwatch.runtime.flink_cluster import FlinkCluster

        cluster = FlinkCluster(config)
        for job in jobs:
            job_id = cluster.submit(job_registry.path(job), job_args)
            print(f"submitted {job} to {cluster.rest_url}: job {job_id}")
    elif len(jobs) == 1:
        importlib.import_module(f"jobs.{jobs[0]}").main(job_args)
    else:
        from stormwatch.flink_env import one_job_graph

        # One embedded mini-cluster for all of them: each job adds its pipeline, then one Flink job runs.
        with one_job_graph(config, "stormwatch-" + "+".join(jobs)) as env:
            for job in jobs:
                importlib.import_module(f"jobs.{job}").main(job_args)
            env.execute("stormwatch-" + "+".join(jobs))


def cmd_job(args) -> None:
    from stormwatch.runtime.flink_cluster import FlinkCluster

    cluster = FlinkCluster(load(args.config))
    if args.action == "list":
        for job in cluster.jobs():
            print(f"{job['jid']}  {job['state']:<10}  {job['name']}")
    elif args.job_id is None:
        raise ConfigError("stormwatch job stop: name the job (its id, from `stormwatch job list`)")
    elif args.no_savepoint:
        cluster.cancel(args.job_id)
        print(f"cancelled {args.job_id}")
    else:
        location = cluster.stop_with_savepoint(args.job_id)
        print(f"stopped {args.job_id} with a savepoint; start it again where it stopped with\n"
              f"  stormwatch run [--cluster] JOB -- --from-savepoint {location} [the job's other arguments]")


def cmd_replay(args) -> None:
    from stormwatch.replay import parse_pace, replay

    config = load(args.config)
    speed = parse_pace(args.pace)
    summary = replay(config, [Path(p) for p in args.files], args.topic, args.format,
                     None if args.as_exported else args.batch_ms, speed, args.rebase)
    print(summary.line(args.topic, speed))


def cmd_generate(args) -> None:
    from stormwatch.traffic.schedule import Schedule, load_schedule
    from stormwatch.traffic.send import generate

    config = load(args.config)
    schedule = load_schedule(args.schedule) if args.schedule else Schedule("steady")
    duration = args.duration if args.duration is not None else schedule.duration_s
    if duration is None and not args.live:
        raise ValueError("--fast needs a --duration (or a schedule with duration_s)")
    print(f"generating {args.rate:g} traces/s, schedule {schedule.name}"
          f"{f' ({duration:g} s)' if duration else ' until Ctrl-C'}", file=sys.stderr)
    sent = generate(config, schedule, args.rate, duration, args.seed,
                    None if args.metrics_format == "none" else args.metrics_format, live=args.live)
    print(sent.line())


def cmd_tail(args) -> None:
    from connectors.kafka import consumer
    from stormwatch.dashboard import DIM, Style
    from stormwatch.policy import default_file
    from stormwatch.policy import load as load_policy
    from stormwatch.tail_format import format_value

    config = load(args.config)
    style = Style.of(load_policy(default_file(config)), colour=sys.stdout.isatty() and not args.no_colour)
    client = consumer(config, *args.topics, auto_offset_reset="earliest" if args.from_beginning else "latest")
    try:
        for record in client:
            if args.raw:
                print(record.value.decode("utf-8", "replace"), flush=True)
            else:
                where = style.paint(f"{record.topic}[{record.partition}]@{record.offset}", DIM)
                print(f"{where} {format_value(record.value, style)}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


# What the SQL client can query: the project's output tables, read from the start of their topics,
# and the views over them.
SQL_CLIENT_TABLES = [
    "tables/stormwatch_spans",
    "tables/stormwatch_dead_letters",
    "tables/stormwatch_edges",
    "tables/stormwatch_service_windows",
    "tables/stormwatch_error_breaks",
    "tables/stormwatch_latency_stages",
    "tables/stormwatch_span_instances",
    "tables/stormwatch_suspects",
    "tables/stormwatch_topology_snapshots",
    "tables/stormwatch_edge_events",
    "tables/stormwatch_instance_windows",
    "tables/stormwatch_health",
    "tables/stormwatch_breaker_decisions",
    "tables/stormwatch_retry_decisions",
    "tables/stormwatch_pareto_fronts",
    "tables/stormwatch_scaling_decisions",
    "views/latest_suspects",
    "views/current_edges",
    "views/sliding_edges",
    "views/retry_load",
    "views/error_chain_breaks",
    "views/current_health",
    "views/current_breakers",
    "views/current_scaling",
]


def cmd_sql(args) -> None:
    from stormwatch import catalog
    from stormwatch.runtime.flink_cluster import FlinkCluster
    from stormwatch.sqlfiles import load_statements

    config = load(args.config)
    reading = {"properties.group.id": "stormwatch-sql-client", "scan.startup.mode": "earliest-offset"}
    settings = ["SET 'sql-client.execution.result-mode' = 'tableau'"]
    if not args.follow:
        # Bounded reads in batch mode: a query answers with final rows, not a changelog.
        reading["scan.bounded.mode"] = "latest-offset"
        settings.append("SET 'execution.runtime-mode' = 'batch'")
    names = catalog.topics(config, catalog.parse_topic_overrides(args.topic))
    variables = catalog.variables(config, names, reading, read_with={role: reading for role in catalog.OUTPUTS.values()})
    code = FlinkCluster(config).sql_client(
        settings + load_statements(SQL_CLIENT_TABLES, variables), Path(args.file) if args.file else None
    )
    if code != 0:
        raise SystemExit(code)


def cmd_policy(args) -> None:
    """Validate a policy file and publish it to the policy topic, keyed by its name, as the decision
    jobs read it: the next window of every job is decided under it. Its warnings (risky but valid
    settings) are printed to stderr; it is published all the same, as the jobs accept it. With a signing
    key ([pipeline.policy]) it is signed; `sign` prints the signed document instead of publishing it."""
    from stormwatch import catalog
    from stormwatch.policy import default_file, warnings
    from stormwatch.policy import load as load_policy
    from stormwatch.policy_signing import UNAUTHENTICATED, sign, signing_key
    from stormwatch.replay import DeliveryError, send

    config = load(args.config)
    path = Path(args.file) if args.file else default_file(config)
    policy = load_policy(path)
    for line in warnings(policy):
        print(f"warning: {path}: {line}", file=sys.stderr)
    key = signing_key(config)
    if args.action == "sign":
        if key is None:
            raise ConfigError("stormwatch policy sign: no signing key configured ([pipeline.policy] signing_key_env "
                              "or signing_key_file)")
        print(json.dumps(sign(policy.raw, key), sort_keys=True))
        return
    document = policy.raw if key is None else sign(policy.raw, key)
    if key is None:
        print(f"warning: publishing unsigned: {UNAUTHENTICATED}", file=sys.stderr)
    topic = catalog.topics(config, catalog.parse_topic_overrides(args.topic))["policy"]
    try:
        send(config, [(topic, policy.name.encode(), json.dumps(document, sort_keys=True).encode())], {topic}, total=1)
    except DeliveryError as e:
        if "AuthorizationFailed" not in str(e):
            raise
        raise ValueError(f"the broker refused this principal's policy record on {topic}: publishing a policy needs "
                         f"WRITE on the topic (a Kafka ACL; README, Securing the policy topic). {e}") from None
    signed = "unsigned" if key is None else f"signed with the key from {key.source}"
    print(f"published policy {policy.name!r} version {policy.version!r} from {path} to {topic}, {signed}")


def cmd_backtest(args) -> None:
    from stormwatch.backtest import main_lines
    from stormwatch.suspects import SuspectPolicy
    from stormwatch.window_aggregates import TraceTiming

    config = load(args.config)
    topology = config.section("pipeline", "topology")
    size = args.window_size if args.window_size is not None else float(topology["window_size_seconds"])
    slide = args.window_slide if args.window_slide is not None else float(topology["window_slide_seconds"])
    policy = SuspectPolicy(**config.section("pipeline", "suspects").get("policy", {}))
    for line in main_lines([Path(p) for p in args.baseline], [Path(p) for p in args.files], policy, size, slide, args.top,
                           shape=not args.aggregates_only, timing=TraceTiming.of(topology)):
        print(line, flush=True)


def cmd_demo(args) -> None:
    from stormwatch.demo import run_demo

    run_demo(load(args.config), rate=args.rate, duration=args.duration, seed=args.seed, schedule_spec=args.schedule,
             resume=args.resume)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stormwatch", description=__doc__)
    parser.add_argument("--config", help="configuration file (default: $STORMWATCH_CONFIG or config/stormwatch.toml)")
    sub = parser.add_subparsers(dest="command", required=True)

    for name, what in (("kafka", "the local Kafka broker (KRaft)"), ("flink", "the local standalone Flink cluster")):
        p = sub.add_parser(name, help=what)
        p.add_argument("action", choices=["start", "stop", "status"])
        p.set_defaults(func=cmd_service, service=name)

    p = sub.add_parser("topics", help="create or list the project's topics")
    p.add_argument("action", choices=["create", "list"])
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser(
        "run",
        help="run a job on the embedded mini-cluster, or submit it to the cluster",
        usage="stormwatch run [--cluster] JOB [JOB...] [-- JOB_ARGS...]",
        description="Several jobs run embedded become one Flink job on one mini-cluster (what the demo "
                    "does); with --cluster each is submitted on its own.",
    )
    p.add_argument("jobs", nargs="+", metavar="JOB", help=f"one or more of: {', '.join(job_registry.names())}")
    p.add_argument("--cluster", action="store_true", help="submit with `flink run -py` to the standalone cluster")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("job", help="list the cluster's jobs, or stop one with a savepoint to restart it from")
    p.add_argument("action", choices=["list", "stop"])
    p.add_argument("job_id", nargs="?")
    p.add_argument("--no-savepoint", action="store_true", help="cancel without a savepoint")
    p.set_defaults(func=cmd_job)

    p = sub.add_parser("replay", help="send trace files (OTLP JSON lines, Zipkin v2 or Jaeger JSON) to a topic")
    p.add_argument("files", nargs="+")
    p.add_argument("--topic", default="otlp_spans")
    p.add_argument("--format", choices=["auto", "otlp", "zipkin", "jaeger"], default="auto")
    p.add_argument("--pace", default="fast", help="fast (default), original, or a speed-up factor such as 10")
    p.add_argument("--rebase", action="store_true", help="move every timestamp so that the first span ends now")
    p.add_argument("--batch-ms", type=int, default=1000,
                   help="re-batch spans by end time into messages of this much event time, as a Collector would")
    p.add_argument("--as-exported", action="store_true", help="send the files' messages unchanged")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("generate", help="send generated AI-chain traffic (spans and instance metrics) to Kafka")
    p.add_argument("--rate", type=float, default=20.0, help="traces per second")
    p.add_argument("--duration", type=float, help="seconds of event time (default: the schedule's, else until Ctrl-C)")
    p.add_argument("--schedule", help=f"a fault schedule: a preset ({', '.join(preset_names())}) "
                                      "or a .toml / .json file (stormwatch/traffic/schedule.py)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--metrics-format", choices=["native", "otlp", "none"], default="native",
                   help="per-instance metrics to stormwatch_instance_metrics (native) or otlp_metrics (otlp)")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument("--live", dest="live", action="store_true", default=True,
                      help="send each message when its time has come (default)")
    pace.add_argument("--fast", dest="live", action="store_false", help="send everything as fast as possible")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("tail", help="print the records of topics as they arrive, decisions readable and coloured")
    p.add_argument("topics", nargs="+")
    p.add_argument("--raw", action="store_true", help="print the values exactly as they are on Kafka")
    p.add_argument("--no-colour", action="store_true")
    p.add_argument("--from-beginning", action="store_true")
    p.set_defaults(func=cmd_tail)

    p = sub.add_parser("sql", help="Flink's SQL client on the standalone cluster, the project's tables defined")
    p.add_argument("--file", "-f", help="run the statements of this file instead of the interactive shell")
    p.add_argument("--follow", action="store_true", help="queries keep reading new records (default: stop at the end)")
    p.add_argument("--topic", action="append", default=[], metavar="ROLE=NAME",
                   help="read the table of ROLE (sink, dead_letters) from topic NAME")
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("policy", help="validate a policy file and publish it to the policy topic (signed, with a key)")
    p.add_argument("action", choices=["publish", "sign"],
                   help="publish: to the topic; sign: print the signed JSON document (for another producer)")
    p.add_argument("file", nargs="?", help="the policy (default: [pipeline.policy] file of the configuration)")
    p.add_argument("--topic", action="append", default=[], metavar="ROLE=NAME", help="policy=NAME: another topic")
    p.set_defaults(func=cmd_policy)

    p = sub.add_parser("backtest", help="rank root-cause suspects offline over trace files; one JSON line per window")
    p.add_argument("files", nargs="+", help="trace files to judge (OTLP JSON lines, Zipkin v2 or Jaeger JSON), in order")
    p.add_argument("--baseline", action="append", default=[], metavar="FILE",
                   help="fault-free traces the ranker learns normal from first (repeatable)")
    p.add_argument("--window-size", type=float, help="seconds (default: [pipeline.topology] window_size_seconds)")
    p.add_argument("--window-slide", type=float, help="seconds (default: [pipeline.topology] window_slide_seconds)")
    p.add_argument("--top", type=int, help="print only this many suspects per window")
    p.add_argument("--aggregates-only", action="store_true",
                   help="rank from the window aggregates alone, without the traces' shape signals (what the job ranks today)")
    p.set_defaults(func=cmd_backtest)

    p = sub.add_parser("demo", help="local Kafka + embedded Flink + generated traffic, output shown live")
    p.add_argument("--rate", type=float, default=20.0, help="traces per second")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--schedule", default="storm", help="the fault schedule: a preset or a file, as for generate")
    p.add_argument("--resume", action="store_true",
                   help="the jobs continue from their consumer groups' offsets, records of earlier runs included "
                        "(default: a fresh run, reading only what is written after the demo starts)")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from connectors.kafka import KafkaSettingError
    from stormwatch.replay import DeliveryError
    from stormwatch.runtime.processes import ServiceError

    argv = sys.argv[1:] if argv is None else argv
    # Everything after `--` belongs to the job (`stormwatch run JOB -- --bounded ...`).
    cut = argv.index("--") if "--" in argv else len(argv)
    args = build_parser().parse_args(argv[:cut])
    args.job_args = argv[cut + 1 :]
    try:
        args.func(args)
    except (ConfigError, ServiceError, KafkaSettingError, DeliveryError, FileNotFoundError, ValueError) as e:
        print(f"stormwatch: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
