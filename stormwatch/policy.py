"""The decision policy (config/policy.toml, overridden while the jobs run by JSON documents on the
compacted policy topic): the validated [health], [retry], [breaker], [pareto], [scaling] and [storm]
sections, and the whole document in `raw`."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormwatch.breaker import BreakerPolicy
from stormwatch.health import HealthPolicy
from stormwatch.pareto import FrontPolicy
from stormwatch.retry_gate import RetryPolicy, backoff_warnings
from stormwatch.retry_storm import StormPolicy
from stormwatch.scaling import ScalingPolicy

# Windows are set up when the job starts; a running job cannot re-window its aggregates.
FIXED_HEALTH_KEYS = ("window_size_seconds", "window_slide_seconds")


class PolicyError(ValueError):
    pass


@dataclass(frozen=True)
class Policy:
    name: str
    version: str
    health: HealthPolicy
    retry: RetryPolicy
    breaker: BreakerPolicy
    pareto: FrontPolicy
    scaling: ScalingPolicy
    raw: dict[str, Any]
    # Optional in a document: one without it (written before storms were decided) gets retry_storm.DEFAULTS.
    storm: StormPolicy = StormPolicy.from_dict(None)


def from_document(doc: Any) -> Policy:
    """A validated policy; PolicyError naming the offending key otherwise."""
    if not isinstance(doc, dict):
        raise PolicyError(f"the policy must be an object, got {type(doc).__name__}")
    for key in ("name", "version"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise PolicyError(f"{key}: expected a non-empty string, got {doc.get(key)!r}")
    sections = {}
    for section, parse in (("health", HealthPolicy.from_dict), ("retry", RetryPolicy.from_dict),
                           ("breaker", BreakerPolicy.from_dict), ("pareto", FrontPolicy.from_dict),
                           ("scaling", ScalingPolicy.from_dict)):
        if section not in doc:
            raise PolicyError(f"{section}: missing section")
        try:
            sections[section] = parse(doc[section])
        except ValueError as e:
            raise PolicyError(str(e)) from e
    try:
        sections["storm"] = StormPolicy.from_dict(doc.get("storm"))
    except ValueError as e:
        raise PolicyError(str(e)) from e
    return Policy(doc["name"], doc["version"], raw=doc, **sections)


def warnings(policy: Policy) -> list[str]:
    """Risks of a valid policy, one line each naming the key: accepted, but logged and, for a document on
    the policy topic, sent to the dead letters (jobs/decision_stream.py). So far backoff parameter
    sensitivity (stormwatch/retry_gate.py backoff_warnings)."""
    return backoff_warnings(policy.retry)


def warning_reason(lines: list[str]) -> str:
    """The dead letter's reason of a policy accepted with these warnings."""
    return "policy accepted with warnings (backoff parameter sensitivity): " + "; ".join(lines)


def default_file(config) -> Path:
    """The policy file a configuration names ([pipeline.policy] file): what jobs start with."""
    return config.resolve(config.get("pipeline", "policy", "file"))


def load(path: str | Path) -> Policy:
    with open(path, "rb") as f:
        try:
            return from_document(tomllib.load(f))
        except tomllib.TOMLDecodeError as e:
            raise PolicyError(f"{path}: {e}") from e


def apply_update(current: Policy, raw_json: str) -> tuple[Policy, str | None]:
    """(the policy in force after the update, None) or (current, why the update was rejected)."""
    try:
        doc = json.loads(raw_json)
    except (json.JSONDecodeError, TypeError) as e:
        return current, f"not JSON: {e}"
    try:
        new = from_document(doc)
    except PolicyError as e:
        return current, str(e)
    if new.name != current.name:
        return current, f"name: the update is for policy {new.name!r}, this job runs {current.name!r}"
    for key in FIXED_HEALTH_KEYS:
        old, proposed = getattr(current.health, key), getattr(new.health, key)
        if old != proposed:
            return current, (f"health.{key}: {proposed} differs from {old}; the windows are fixed when the job "
                             f"starts, restart the job with the new policy file to change them")
    return new, None
