"""Can the health score single out the injected service on the labelled TrainTicket faults?

Issue 4 asks that, on each labelled fault, the injected service's score drop below every other
service's. This computes, from the raw files (plain Python, reference/trace_windows.py's definitions), the
policy's health score (stormwatch.health.score, config/policy.toml) of every service in every sliding
window of the policy that starts at or after the injection, and the rank of the injected service from
the lowest score up, under variants of the two inputs that decide it:

- latency: the p95 of the service's SERVER span durations (what the health job uses), or the p95 of
  the self (exclusive) times of all its spans, its own time without its callees';
- min_calls: the policy's, and lower ones (the injected services answer few calls a window).

Error rates are those of the SERVER spans either way. A service scores only with at least min_calls
SERVER spans in the window.

    .venv/bin/python bench/health_localisation.py [--out bench/results/health_localisation.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script from anywhere: tests/ and stormwatch/ are packages at the project root.
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from reference.otlp import spans_of_file  # noqa: E402
from reference.trace_windows import (  # noqa: E402
    NS_PER_MS, SERVER, dedupe, duration_ms, exclusive_ns, labelled_files, percentile, window_starts)
from stormwatch import policy as policies  # noqa: E402
from stormwatch.health import HealthInputs, score  # noqa: E402

MIN_CALLS = [None, 5, 3]  # None: the policy's
LATENCIES = {"server": "SERVER span p95 (the job's)", "own": "self-time p95 of all its spans"}


def service_figures(path: Path, size_ms: int, slide_ms: int) -> dict[int, dict[str, dict]]:
    """window start -> service -> SERVER calls, SERVER errors, latencies (server durations, self times)."""
    spans = dedupe(spans_of_file(path))
    children = defaultdict(list)
    for s in spans:
        if s.parent_span_id is not None:
            children[(s.trace_id, s.parent_span_id)].append(s)
    windows: dict[int, dict[str, dict]] = defaultdict(
        lambda: defaultdict(lambda: {"calls": 0, "errors": 0, "server": [], "own": []}))
    for s in spans:
        own_ms = exclusive_ns(s, children[(s.trace_id, s.span_id)]) / NS_PER_MS
        for start in window_starts(s.end // NS_PER_MS, size_ms, slide_ms):
            figures = windows[start][s.service_name]
            figures["own"].append(own_ms)
            if s.kind == SERVER:
                figures["calls"] += 1
                figures["errors"] += s.error
                figures["server"].append(duration_ms(s))
    return windows


def ranks(windows, starts: list[int], root: str, size_ms: int, health, latency: str) -> list[tuple[str, str]]:
    """Per window: the injected service's rank from the lowest score ('-' when it has no score), and
    who scored lowest, with its error rate and latency p95."""
    out = []
    for start in starts:
        scores = {}
        for service, f in windows[start].items():
            inputs = HealthInputs(entity_kind="service", entity_key=f"service:{service}", service=service,
                                  instance=None, caller=None, callee=None, window_start_ms=start,
                                  window_end_ms=start + size_ms, calls=f["calls"], errors=f["errors"],
                                  p95_ms=percentile(f[latency], 0.95) if f[latency] else None)
            result = score(inputs, health)
            if result.score is not None:
                scores[service] = (result.score, result.error_rate, inputs.p95_ms)
        order = sorted(scores, key=lambda s: (scores[s][0], s))
        lowest = (f"{order[0]} ({scores[order[0]][0]:.3f}: errors {scores[order[0]][1]:.0%}, "
                  f"p95 {scores[order[0]][2]:.0f} ms)") if order else "no service scored"
        out.append((str(order.index(root) + 1) if root in scores else "-", lowest))
    return out


def _lowest(ranked: list[tuple[str, str]]) -> str:
    return f"{sum(rank == '1' for rank, _ in ranked)}/{len(ranked)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "health_localisation.md")
    args = parser.parse_args()
    began = time.monotonic()
    default = policies.load(ROOT / "config" / "policy.toml")
    size_ms = default.health.window_size_seconds * 1000
    slide_ms = default.health.window_slide_seconds * 1000
    faults = [f for f in labelled_files() if f.root_cause_service]

    summary, details = [], []
    for f in faults:
        windows = service_figures(f.path, size_ms, slide_ms)
        after = sorted(w for w in windows if w >= f.inject_ms)
        # Before: complete windows only, wholly before the injection.
        before = sorted(w for w in windows if w + size_ms <= f.inject_ms and w - min(windows) >= size_ms)
        details.append(f"- `{f.path.name}` ({f.fault_type}, `{f.root_cause_service}`)")
        for latency, what in LATENCIES.items():
            for min_calls in MIN_CALLS:
                health = dataclasses.replace(default.health, min_calls=min_calls or default.health.min_calls)
                got = ranks(windows, after, f.root_cause_service, size_ms, health, latency)
                earlier = ranks(windows, before, f.root_cause_service, size_ms, health, latency)
                label = f"{what}, min_calls {health.min_calls}"
                summary.append(f"| `{f.path.name}` | {f.fault_type} | {label} | {_lowest(earlier)} | {_lowest(got)} |")
                details.append(f"  - {label}: ranks {' '.join(r for r, _ in got)}")
                if latency == "own" and min_calls == MIN_CALLS[-1]:
                    details.extend(f"    - window {i + 1}: lowest {lowest}" for i, (_, lowest) in enumerate(got))

    results_file.write(args.out, results_file.heading(
        "Health score localisation on the labelled TrainTicket faults",
        ".venv/bin/python bench/health_localisation.py --out bench/results/health_localisation.md") + [
        f"Policy `{default.version}`: windows {size_ms // 1000} s sliding by {slide_ms // 1000} s, weights "
        f"{dict(default.health.weights)}, latency_cap {default.health.latency_cap_ms:.0f} ms, min_calls "
        f"{default.health.min_calls}. Windows from the labelled injection on; a service scores with at least "
        "min_calls SERVER spans. Windows in which the injected service has the lowest score of all: *before*, "
        "those wholly before the injection (and after the file's first window, which is partly empty); *after*, "
        "those starting at or after it.",
        "",
        "| file | fault | latency input, min_calls | lowest before | lowest after |",
        "|---|---|---|---|---|",
        *summary,
        "",
        "## Rank of the injected service from the lowest score, per window after the injection",
        "",
        "(`-`: no score, fewer calls than min_calls.) For the most permissive variant (own time, lowest "
        "min_calls), who scored lowest instead:",
        "",
        *details,
        "",
        f"Run time: {time.monotonic() - began:.1f} s.",
    ])


if __name__ == "__main__":
    main()
