"""The per-window aggregates (defined in stormwatch/window_aggregates.py, the reference Flink SQL must
match) of the labelled TrainTicket files, and the evaluation protocol of the suspects ranker."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from reference.otlp import SHARED_DATA, spans_of_file
from stormwatch.suspects import SuspectPolicy, SuspectRanker, WindowVerdict
from stormwatch.window_aggregates import (  # noqa: F401  (re-exported for the tests)
    CLIENT, NS_PER_MS, SERVER, Window, aggregate, dedupe, duration_ms,
    exclusive_ns, gap_ms, percentile, window_starts)


def windows_of_file(path: Path, size_s: float, slide_s: float | None = None) -> list[Window]:
    return aggregate(spans_of_file(path), size_s, slide_s)


LABELS = SHARED_DATA / "labels.json"


@dataclass(frozen=True)
class LabelledFile:
    """One file of the TrainTicket set and its label (README.md and labels.json there)."""

    path: Path
    root_cause_service: str | None
    fault_type: str | None
    inject_ms: int | None

    @property
    def fault_free(self) -> bool:
        return self.root_cause_service is None


def labelled_files() -> list[LabelledFile]:
    """The labelled files, fault-free first, then the faults in file order."""
    out = [
        LabelledFile(
            path=SHARED_DATA / entry["file"],
            root_cause_service=entry.get("root_cause_service"),
            fault_type=entry.get("fault_type"),
            inject_ms=entry["inject_unix_nano"] // NS_PER_MS if "inject_unix_nano" in entry else None,
        )
        for entry in json.loads(LABELS.read_text())
    ]
    return sorted(out, key=lambda f: (not f.fault_free, f.path.name))


def replay(ranker: SuspectRanker, windows: list[Window]) -> list[WindowVerdict]:
    return [ranker.observe(w.services, w.edges) for w in windows]


def fault_verdicts(policy: SuspectPolicy, fault_free: list[Window], fault: list[Window]) -> list[tuple[Window, WindowVerdict]]:
    """The evaluation protocol: a fresh ranker primed on the fault-free file, then fed the fault
    file from its start (its pre-injection windows prime it further); every window's verdict."""
    ranker = SuspectRanker(policy)
    replay(ranker, fault_free)
    return list(zip(fault, replay(ranker, fault)))


def after_injection(verdicts: list[tuple[Window, WindowVerdict]], inject_ms: int) -> list[tuple[Window, WindowVerdict]]:
    """The windows that start at or after the injection: wholly in the fault's time."""
    return [(w, v) for w, v in verdicts if w.start_ms >= inject_ms]
