"""Every benchmark, one after the other, against the real Kafka and Flink, and one results file that holds
all their results, each with the command that produced it.

    .venv/bin/python bench/run_all.py [--quick] [--out bench/results/all.md]

Each benchmark also writes its own file under bench/results/ (see bench/README.md). --quick runs every
benchmark on small inputs and a short live run, to check the suite itself in minutes; its figures are
not results and go to bench/results/quick/.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

RESULTS = ROOT / "bench" / "results"
# (script, arguments of the full run, arguments of a --quick run), in the order they run.
BENCHMARKS = [
    ("throughput.py", [], ["--spans", "20000"]),
    ("growth.py", [], ["--spans", "5000"]),
    ("live_pipeline.py", [], ["--minutes", "4"]),
    ("pareto_front.py", [], ["--repetitions", "3"]),
    ("retry_amplification.py", [], ["--seconds", "60"]),
    ("rootcause_eval.py", [], []),
    ("health_localisation.py", [], []),
]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small inputs: checks the suite, measures nothing")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    folder = RESULTS / "quick" if args.quick else RESULTS
    out = args.out or folder / "all.md"
    command = results_file.command(__file__, argv)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sections, summary = [], []
    for script, full, quick in BENCHMARKS:
        result = folder / f"{Path(script).stem}.md"
        bench_command = [sys.executable, str(ROOT / "bench" / script), *(quick if args.quick else full), "--out", str(result)]
        if script == "throughput.py":  # its figures as JSON too, beside its results file
            bench_command += ["--json", str(result.with_suffix(".json"))]
        print(f"== {' '.join(bench_command)}", flush=True)
        began, load_before = time.monotonic(), os.getloadavg()[0]
        code = subprocess.call(bench_command, cwd=ROOT)
        minutes = (time.monotonic() - began) / 60
        # Figures only compare on a quiet machine: the load average shows whether it was.
        summary.append(f"| `{script}` | {'ok' if code == 0 else f'failed (exit {code})'} | {minutes:.1f} min "
                       f"| {load_before:.1f} / {os.getloadavg()[0]:.1f} | [{result.name}]({result.name}) |")
        if code == 0:
            # One level down: each file's own title becomes a section of this one.
            sections += ["", *("#" + line if line.startswith("#") else line for line in result.read_text().splitlines())]
    lines = results_file.heading("stormwatch benchmarks" + (" (--quick: a check of the suite, not results)"
                                                            if args.quick else ""), command) + [
        f"Started {started} on the benchmark's own broker and cluster (bench/stormwatch-bench.toml).", "",
        f"The machine: {os.cpu_count()} cores. Load is the 1-minute load average before / after each benchmark.", "",
        "| benchmark | outcome | took | load | its own file |", "|---|---|---|---|---|", *summary, *sections]
    results_file.write(out, lines)
    if any("failed" in row for row in summary):
        raise SystemExit("some benchmarks failed: see above")


if __name__ == "__main__":
    main(sys.argv[1:])
