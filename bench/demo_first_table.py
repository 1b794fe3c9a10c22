"""How long `make demo` takes to show its first table: the demo (`stormwatch demo`, what `make demo`
runs after bootstrapping) is started as a user starts it, each line of its output is timestamped, and
the run ends at its first table with a health score (or after --timeout seconds). Reported: from the
command's start and from the first job's start ("job ... running": the span path and health start
together, the scaling job after the first table) to the moment the span path reads (the traffic
starts), to the first table (breakers and suspects; health may still be n/a) and to the first table
with a service's health score. A warm machine: bootstrap done, the broker's and Flink's files cached
by an earlier run (run it twice; the second is the warm figure).

    .venv/bin/python bench/demo_first_table.py [--timeout 300] [--out bench/results/demo_first_table.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from stormwatch.runtime.processes import stop_group  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "demo_first_table.md"
FIRST_TABLE = "--- health window ending"
# A service row of the table with a score in the health column (not n/a).
SCORED_ROW = re.compile(r"^\S+\s+\d+\.\d\d\s")


def run(timeout_s: float) -> list[tuple[float, str]]:
    """(seconds since the start, line) of the demo's output up to its first table."""
    began = time.monotonic()
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "stormwatch"), "demo"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append((time.monotonic() - began, line.rstrip()))
            if SCORED_ROW.match(line) or time.monotonic() - began > timeout_s:
                break
    finally:
        stop_group(proc, signal.SIGINT, timeout=120)  # the demo's own Ctrl-C: it stops its jobs and its broker
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    command = results_file.command(__file__, argv)
    lines = run(args.timeout)

    def first(marker: str) -> float | None:
        return next((t for t, line in lines if marker in line), None)

    jobs = [t for t, line in lines if "on the embedded Flink" in line]
    start = jobs[0] if jobs else None
    health = first("job health running")
    reading, table = first("the span path reads ("), first(FIRST_TABLE)
    scored = next((t for t, line in lines if SCORED_ROW.match(line)), None)

    def since(t: float | None, origin: float | None) -> str:
        return "not reached" if t is None or origin is None else f"{t - origin:.1f} s"

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = results_file.heading("`make demo`: time to the first table", command) + [
        f"- Date: {now}; load average at the end {os.getloadavg()[0]:.1f}", "",
        "| moment | from the command's start | from the first job's start |", "|---|---|---|",
        f"| the span path job started (the first `job ... running`) | {since(start, 0.0)} | 0 s |",
        f"| the span path reads, traffic starts | {since(reading, 0.0)} | {since(reading, start)} |",
        f"| the health job started | {since(health, 0.0)} | {since(health, start)} |",
        f"| first table | {since(table, 0.0)} | {since(table, start)} |",
        f"| first table with a health score | {since(scored, 0.0)} | {since(scored, start)} |", "",
        "The demo's output up to there:", "", "```",
        *(f"{t:6.1f} s  {line}" for t, line in lines if not line.startswith("dead letter")), "```"]
    results_file.write(args.out, out)
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
