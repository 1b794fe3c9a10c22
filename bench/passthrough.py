"""Flink's own raw Kafka -> Kafka copy, the yardstick of the throughput benchmarks: the bytes of every
message of SOURCE to SINK, with the jobs' configuration and delivery guarantee (checkpoints,
transactions), at the configured parallelism. Live unless --bounded.

    .venv/bin/python bench/passthrough.py --config CONFIG [--bounded] SOURCE SINK GROUP     # embedded
    (bench/throughput.py submits it to the standalone cluster with `flink run -py`)

Its own file, importing only the project's packages: `flink run -py` ships those (stormwatch,
connectors, jobs), not bench/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Run as a script: stormwatch/, connectors/ and jobs/ are packages at the project root (on a cluster,
# the shipped archive holds them).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str]) -> None:
    from connectors.kafka import table_options
    from jobs.common import Inserts
    from stormwatch.config import load
    from stormwatch.flink_env import table_environment

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config")
    parser.add_argument("--bounded", action="store_true", help="stop at the offsets that are the latest at the start")
    parser.add_argument("source")
    parser.add_argument("sink")
    parser.add_argument("group")
    args = parser.parse_args(argv)
    config = load(args.config)
    t_env = table_environment(config, "bench-passthrough")
    reading = {"properties.group.id": args.group, "scan.startup.mode": "earliest-offset", "format": "raw"}
    if args.bounded:
        reading["scan.bounded.mode"] = "latest-offset"
    t_env.execute_sql(f"CREATE TEMPORARY TABLE src (`payload` BYTES) WITH ({table_options(config, args.source, **reading)})")
    t_env.execute_sql(f"CREATE TEMPORARY TABLE dst (`payload` BYTES) WITH ({table_options(config, args.sink, format='raw')})")
    inserts = Inserts(t_env, config, args.group)
    inserts.sql("INSERT INTO dst SELECT `payload` FROM src")
    inserts.execute(bounded=args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
