"""Fault schedules: what goes wrong when in a generated run, from a TOML or JSON file or a preset.

A schedule file (TOML shown; JSON has the same keys):

    description = "what it shows"          # optional
    duration_s = 300                       # optional: the run's length when --duration is not given
    load = [[0, 1.0], [60, 1.0], [180, 2.5]]   # optional: rate multiplier, linear between (s, factor) points
    [retries]                              # optional: caller -> how often it retries a failed call
    orchestrator = 2
    [[faults]]                             # any number; each a FaultWindow
    service = "llm-inference"
    instance = "llm-inference-1"           # optional: one instance only
    start_s = 60                           # seconds after the run's start (traces starting in [start_s, end_s))
    end_s = 120                            # the fault ends: recovery
    latency_factor = 1.0                   # slower at everything
    delay_ms = 0.0                         # extra own time per request: a latency spike
    error_rate = 0.0                       # extra failures: an error burst
    capacity_factor = 1.0                  # capacity left: a slow instance saturates

Presets are such files in stormwatch/traffic/presets/, named by their stem (`storm`, `slow-instance`...).
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from stormwatch.traffic.faults import FaultWindow, LoadShape

PRESETS_DIR = Path(__file__).parent / "presets"
_KEYS = {"description", "duration_s", "load", "retries", "faults"}
_FAULT_KEYS = {f.name for f in dataclasses.fields(FaultWindow)}


@dataclass(frozen=True)
class Schedule:
    name: str
    description: str = ""
    faults: tuple[FaultWindow, ...] = ()
    load: LoadShape | None = None
    retries: dict[str, int] = dataclasses.field(default_factory=dict)
    duration_s: float | None = None


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def load_schedule(spec: str) -> Schedule:
    """A preset by name, or a schedule file (.toml or .json) by path."""
    preset = PRESETS_DIR / f"{spec}.toml"
    path = preset if spec in preset_names() else Path(spec)
    if not path.is_file():
        raise ValueError(f"no fault schedule {spec!r}: not a file, nor a preset ({', '.join(preset_names())})")
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {e}") from None
    return parse_schedule(data, path.stem if path == preset else str(path))


def parse_schedule(data: dict, name: str) -> Schedule:
    unknown = set(data) - _KEYS
    if unknown:
        raise ValueError(f"{name}: unknown key(s) {sorted(unknown)}; a schedule has {sorted(_KEYS)}")
    faults = []
    for i, fault in enumerate(data.get("faults", [])):
        unknown = set(fault) - _FAULT_KEYS
        if unknown:
            raise ValueError(f"{name}: faults[{i}]: unknown key(s) {sorted(unknown)}; a fault has {sorted(_FAULT_KEYS)}")
        try:
            faults.append(FaultWindow(**fault))
        except TypeError as e:  # a required key missing
            raise ValueError(f"{name}: faults[{i}]: {e}") from None
    load = data.get("load")
    retries = data.get("retries", {})
    if not all(isinstance(n, int) and n >= 0 for n in retries.values()):
        raise ValueError(f"{name}: retries must be whole numbers, at least 0: {retries}")
    return Schedule(
        name=name,
        description=data.get("description", ""),
        faults=tuple(faults),
        load=LoadShape(tuple((float(t), float(f)) for t, f in load)) if load else None,
        retries=dict(retries),
        duration_s=data.get("duration_s"),
    )
