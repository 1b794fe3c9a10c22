"""Retry amplification as the span path measures it (stormwatch/window_aggregates.py, the reference the
job's per-trace facts are held equal to), on the demo's generated traffic with a fault schedule (default:
the `storm` preset) and on the labelled TrainTicket files: per window, each edge into the failing
service's chain with its calls, retries and amplification, and the end-to-end amplification along the
call path (stormwatch/topology_graph.py path_amplification). Figures, not timings.

    .venv/bin/python bench/retry_amplification.py [--schedule storm] [--rate 20] [--seconds 270] [--out bench/results/retry_amplification.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from reference.otlp import SHARED_DATA, Span, spans_of_file  # noqa: E402
from stormwatch.topology_graph import EdgeSeen, TopologyTracker  # noqa: E402
from stormwatch.traffic.generator import Params, TraceGenerator  # noqa: E402
from stormwatch.traffic.schedule import load_schedule  # noqa: E402
from stormwatch.window_aggregates import aggregate  # noqa: E402

SIZE_S = 30


def generated(schedule: str, rate: float, seconds: float, seed: int) -> list[Span]:
    plan = load_schedule(schedule)
    generator = TraceGenerator(seed=seed, faults=plan.faults, params=Params(retries=plan.retries), load=plan.load)
    spans = []
    for batch in generator.generate(rate, seconds):
        spans += [Span(s.trace_id, s.span_id, s.parent_span_id, s.service, s.instance, s.name, int(s.kind),
                       int(s.status_code) == 2, s.start_unix_nano, s.end_unix_nano) for s in batch]
    return spans


def table(spans: list[Span]) -> list[str]:
    windows = aggregate(spans, SIZE_S)
    first = windows[0].start_ms
    lines = ["| window (s from start) | edge | calls | retries | amplification | path amplification | server errors |",
             "|---|---|---|---|---|---|---|"]
    tracker = TopologyTracker()
    for w in windows:
        seen = [EdgeSeen(e.caller, e.callee, False, e.calls, e.client_errors + e.server_errors, None, e.retries)
                for e in w.edges]
        snapshot, _ = tracker.observe(w.start_ms, w.end_ms, seen)
        paths = {(e["caller"], e["callee"]): e["path_amplification"] for e in snapshot["edges"]}
        for e in w.edges:
            if e.retries or paths[(e.caller, e.callee)] > 1:
                lines.append(f"| {(w.start_ms - first) // 1000}–{(w.end_ms - first) // 1000} | {e.caller} → {e.callee} "
                             f"| {e.calls} | {e.retries} | {e.calls / (e.calls - e.retries):.2f} "
                             f"| {paths[(e.caller, e.callee)]:.2f} | {e.server_errors} |")
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedule", default="storm")
    parser.add_argument("--rate", type=float, default=20.0, help="traces/s")
    parser.add_argument("--seconds", type=float, default=270.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "retry_amplification.md")
    args = parser.parse_args(argv)
    plan = load_schedule(args.schedule)
    lines = results_file.heading("Retry amplification measured from spans", results_file.command(__file__, argv))
    lines += [f"Generated traffic: schedule `{args.schedule}` ({' '.join(plan.description.split())}), "
              f"{args.rate:g} traces/s for {args.seconds:g} s, seed {args.seed}; windows of {SIZE_S} s "
              f"(tumbling), edges with retries or a path amplification above 1:", ""]
    lines += table(generated(args.schedule, args.rate, args.seconds, args.seed))
    lines += ["", "The labelled TrainTicket files (tests/integration/test_span_path_reference.py holds the job "
              "to these counts), every edge with retries:", ""]
    for path in sorted(SHARED_DATA.glob("*.otlp.jsonl")):
        lines += [f"`{path.name}`:", ""] + table(list(spans_of_file(path))) + [""]
    results_file.write(args.out, lines)


if __name__ == "__main__":
    main(sys.argv[1:])
