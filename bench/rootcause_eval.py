"""Root-cause ranking (stormwatch.suspects) on the labelled TrainTicket faults.

For each window configuration: the rank of the injected service in every window that starts at or
after the injection (a fresh ranker per fault, primed on the fault-free file and the fault file's
own pre-injection windows: tests.trace_windows.fault_verdicts), top-1 / top-3 accuracy, and the
fault-free windows flagged (ranker primed on the first half of the fault-free file, judged on the
second half). Then the sensitivity of the same numbers to each policy parameter, one at a time.

    .venv/bin/python bench/rootcause_eval.py [--out bench/results/rootcause_eval.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script from anywhere: tests/ and stormwatch/ are packages at the project root.
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/, beside this file)

from stormwatch.suspects import SuspectPolicy, SuspectRanker  # noqa: E402
from tests.trace_windows import LabelledFile, Window, after_injection, fault_verdicts, labelled_files, replay, windows_of_file  # noqa: E402

# (size, slide) in seconds; slide None = tumbling.
CONFIGS = [(10, None), (20, None), (30, None), (30, 10)]
# One parameter at a time, around the defaults.
SENSITIVITY = {
    "baseline_half_life_s": [300.0, 7200.0],
    "flag_alpha": [0.01, 0.0001],
    "min_baseline_windows": [1.0, 4.0],
    "error_prior_rate": [0.001, 0.05],
    "error_prior_shape": [0.03, 0.3, 1.0],
    "latency_tail_dof": [2.0, 5.0, 30.0],
    "latency_prior_scale": [0.15, 0.6],
    "latency_prior_windows": [5.0, 80.0],
    "explained_discount": [0.25, 1.0],
}


@cache
def windows(path: Path, size: float, slide: float | None) -> list[Window]:
    return windows_of_file(path, size, slide)


def label(size: float, slide: float | None) -> str:
    return f"tumbling {size:g} s" if slide is None else f"sliding {size:g} s / {slide:g} s"


@dataclasses.dataclass
class Result:
    # fault file name -> rank of the root cause in each post-injection window (None: no record)
    ranks: dict[str, list[int | None]]
    # fault file name -> the first-ranked service of each post-injection window
    tops: dict[str, list[str]]
    flagged_windows: int
    judged_windows: int
    flagged_services: list[str]

    def first(self, k: int) -> tuple[int, int]:
        """Faults whose root is in the top k in the first post-injection window that has it."""
        firsts = [next((r for r in ranks if r is not None), None) for ranks in self.ranks.values()]
        return sum(r is not None and r <= k for r in firsts), len(firsts)

    def every(self, k: int) -> tuple[int, int]:
        """Post-injection windows (all faults) whose root, present, is in the top k."""
        present = [r for ranks in self.ranks.values() for r in ranks if r is not None]
        return sum(r <= k for r in present), len(present)


def evaluate(policy: SuspectPolicy, size: float, slide: float | None, files: list[LabelledFile]) -> Result:
    fault_free = windows(files[0].path, size, slide)
    ranks, tops = {}, {}
    for f in files[1:]:
        post = after_injection(fault_verdicts(policy, fault_free, windows(f.path, size, slide)), f.inject_ms)
        ranks[f.path.name] = [v.rank_of(f.root_cause_service) for _, v in post]
        tops[f.path.name] = [v.suspects[0].service for _, v in post]
    half = len(fault_free) // 2
    ranker = SuspectRanker(policy)
    replay(ranker, fault_free[:half])
    judged = replay(ranker, fault_free[half:])
    flagged = sorted({s.service for v in judged for s in v.flagged})
    return Result(ranks, tops, sum(bool(v.flagged) for v in judged), len(judged), flagged)


def fraction(pair: tuple[int, int]) -> str:
    hit, total = pair
    return f"{hit}/{total}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "rootcause_eval.md")
    args = parser.parse_args()
    started = time.monotonic()
    files = labelled_files()
    default = SuspectPolicy()
    out = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    lines = results_file.heading("Root-cause ranking on the labelled TrainTicket faults",
                                 f".venv/bin/python bench/rootcause_eval.py --out {out}") + [
        f"Default policy: `{default}`",
        "",
        "Protocol: a fresh ranker per fault file, fed the fault-free file and then the fault file from its start;",
        "ranks are those of the injected `root_cause_service` in each window that starts at or after `inject_unix_nano`",
        "(`-`: the service has no record in that window, which is then left out of the accuracies). *first*: the",
        "first such window with a record of the service, one per fault; *every*: all such windows, pooled over the faults.",
        "Fault-free: a ranker primed on the first half of the fault-free file's windows, judged on the second half.",
        "",
        "## Window configurations (default policy)",
        "",
        "| windows | top-1 first | top-3 first | top-1 every | top-3 every | fault-free windows flagged |",
        "|---|---|---|---|---|---|",
    ]
    results = {(size, slide): evaluate(default, size, slide, files) for size, slide in CONFIGS}
    for (size, slide), r in results.items():
        flagged = f"{r.flagged_windows}/{r.judged_windows}" + (f" ({', '.join(r.flagged_services)})" if r.flagged_services else "")
        lines.append(f"| {label(size, slide)} | {fraction(r.first(1))} | {fraction(r.first(3))} | {fraction(r.every(1))} | {fraction(r.every(3))} | {flagged} |")
    lines += [
        "",
        "## Rank of the root cause in each post-injection window",
        "",
        "In brackets: the service ranked first instead. Error origins of the root cause in the file's 20 s windows",
        "before / after the labelled injection tell whether an error fault shows after its label at all.",
        "",
    ]
    for f in files[1:]:
        before = sum(r.error_origins for w in windows(f.path, 20, None) if w.end_ms <= f.inject_ms for r in w.services if r.service == f.root_cause_service)
        after = sum(r.error_origins for w in windows(f.path, 20, None) if w.start_ms >= f.inject_ms for r in w.services if r.service == f.root_cause_service)
        lines.append(f"- `{f.path.name}` ({f.fault_type}, `{f.root_cause_service}`; error origins {before} before / {after} after):")
        for (size, slide), r in results.items():
            cells = ["-" if x is None else str(x) if x == 1 else f"{x} ({top})" for x, top in zip(r.ranks[f.path.name], r.tops[f.path.name])]
            lines.append(f"  - {label(size, slide)}: {' '.join(cells)}")
    lines += [
        "",
        "## Sensitivity (one parameter at a time; top-1 *every* per window configuration, fault-free windows flagged over all four)",
        "",
        "| parameter | value | " + " | ".join(label(*c) for c in CONFIGS) + " | top-3 every (all) | fault-free flagged |",
        "|---|---|" + "---|" * len(CONFIGS) + "---|---|",
    ]
    variants = [("(defaults)", None, results)]
    for name, values in SENSITIVITY.items():
        for value in values:
            policy = dataclasses.replace(default, **{name: value})
            variants.append((name, value, {c: evaluate(policy, *c, files) for c in CONFIGS}))
    for name, value, per_config in variants:
        top1 = " | ".join(fraction(per_config[c].every(1)) for c in CONFIGS)
        top3 = sum(r.every(3)[0] for r in per_config.values()), sum(r.every(3)[1] for r in per_config.values())
        ff = sum(r.flagged_windows for r in per_config.values()), sum(r.judged_windows for r in per_config.values())
        lines.append(f"| {name} | {'' if value is None else f'{value:g}'} | {top1} | {fraction(top3)} | {fraction(ff)} |")
    lines += ["", f"Run time: {time.monotonic() - started:.1f} s."]
    results_file.write(args.out, lines)


if __name__ == "__main__":
    main()
