"""Time of one service window's Pareto front (stormwatch.pareto.front) and scaling step
(stormwatch.scaling.step) for 10 to 10,000 instances, with the default policy (config/policy.toml).

Each repetition is a new window of random instances (seeded): QPS uniform, latency rising with QPS
with log-normal noise, a few with too few calls or still warming up, so the front, the dominated and
the excluded all occur. step() is fed the windows in order, 10 s apart, carrying its state, so its
stabilization history is as full as in a running job.

    .venv/bin/python bench/pareto_front.py [--repetitions 30] [--out bench/results/pareto_front.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script from anywhere: stormwatch/ is a package at the project root.
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from stormwatch.pareto import InstancePoint, front  # noqa: E402
from stormwatch.policy import load  # noqa: E402
from stormwatch.scaling import step  # noqa: E402

SIZES = [10, 100, 1_000, 10_000]
SEED = 42
SLIDE_MS = 10_000
WINDOW_MS = 30_000


def window_points(rng: random.Random, n: int, end_ms: int) -> list[InstancePoint]:
    points = []
    for i in range(n):
        qps = rng.uniform(1, 500)
        calls = int(qps * WINDOW_MS / 1000) if rng.random() > 0.05 else rng.randrange(20)
        first_seen = end_ms - (rng.randrange(25_000) if rng.random() < 0.05 else 3_600_000)
        points.append(InstancePoint(f"instance-{i:05d}", qps, (50 + 2 * qps) * rng.lognormvariate(0, 0.4),
                                    calls, first_seen))
    return points


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "pareto_front.md")
    args = parser.parse_args()
    policy = load(ROOT / "config" / "policy.toml")
    rng = random.Random(SEED)
    rows = []
    for n in SIZES:
        front_ms, step_ms, front_sizes, state = [], [], [], None
        for k in range(args.repetitions):
            end = 1_000_000 + k * SLIDE_MS
            points = window_points(rng, n, end)
            started = time.perf_counter_ns()
            f = front("svc", end - WINDOW_MS, end, points, policy.pareto)
            front_ms.append((time.perf_counter_ns() - started) / 1e6)
            started = time.perf_counter_ns()
            state, _ = step(state, f, n, policy.scaling)
            step_ms.append((time.perf_counter_ns() - started) / 1e6)
            front_sizes.append(len(f.points))
        rows.append((n, statistics.median(front_ms), percentile(front_ms, 0.9),
                     statistics.median(front_ms) * 1000 / n, statistics.median(front_sizes),
                     statistics.median(step_ms), percentile(step_ms, 0.9)))

    out = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    default_out = out == Path("bench/results/pareto_front.md")
    command = ".venv/bin/python bench/pareto_front.py" + ("" if args.repetitions == 30 else f" --repetitions {args.repetitions}") \
        + ("" if default_out else f" --out {out}")
    lines = results_file.heading("Pareto front and scaling step per service window", command) + [
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}",
        f"- Policy: config/policy.toml, `{policy.pareto}`",
        f"- Input: {args.repetitions} windows per size (seed {SEED}), each of fresh random instances: QPS uniform on",
        "  [1, 500], latency (50 + 2·QPS) ms × log-normal(0, 0.4), 5 % with fewer calls than the minimum and 5 %",
        "  still warming up; step() fed the windows 10 s apart with its state carried over.",
        "",
        "Times are wall time of one call (`time.perf_counter_ns`), median and 90th percentile over the windows;",
        "garbage collection runs when it would in a job, so a call may pay for the garbage of earlier ones.",
        "",
        "| instances | front() median ms | front() p90 ms | µs per instance | points on the front (median) "
        "| step() median ms | step() p90 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, f_med, f_p90, per_instance, size, s_med, s_p90 in rows:
        lines.append(f"| {n:,} | {f_med:.3f} | {f_p90:.3f} | {per_instance:.2f} | {size:g} | {s_med:.3f} | {s_p90:.3f} |")
    lines += [
        "",
        "front() is a sort and one sweep, O(n log n): the time per instance stays within a small factor from 10 to",
        "10,000 instances. step() reads the front's max-QPS and min-latency points and its own bounded history",
        "(the last scale_down_stabilization_seconds of recommendations): none of its work depends on n. Both are",
        "far below a window slide (10 s) even at 10,000 instances per service.",
    ]
    results_file.write(args.out, lines)


if __name__ == "__main__":
    main()
