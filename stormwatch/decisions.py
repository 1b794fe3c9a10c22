"""Decision records as the decision jobs publish them: an envelope every decision topic shares and
canonical JSON, so replaying the same input gives byte-identical records and the same decision ids."""

from __future__ import annotations

import hashlib
import json
from typing import Any

FLOAT_DIGITS = 6
# The envelope's fields as the typed tables of the decision topics declare them (sql/tables/, the
# DECISION_ENVELOPE macro of stormwatch/sqlfiles.py): one definition for every decision topic.
ENTITY_SQL_TYPE = ("ROW<`kind` STRING, `key` STRING, `service` STRING, `instance` STRING, "
                   "`caller` STRING, `callee` STRING>")
ENVELOPE_SQL_COLUMNS = (
    ("decision_id", "STRING"),
    ("sequence", "BIGINT"),
    ("entity", ENTITY_SQL_TYPE),
    ("decision_type", "STRING"),
    ("window_start_ms", "BIGINT"),
    ("window_end_ms", "BIGINT"),
    ("policy_version", "STRING"),
)


def decision_id(entity_key: str, decision_type: str, window_end_ms: int, policy_version: str) -> str:
    """Stable across replays: the same entity, type, window and policy give the same id."""
    text = "|".join((entity_key, decision_type, str(window_end_ms), policy_version))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def envelope(entity: dict, decision_type: str, sequence: int, window_start_ms: int, window_end_ms: int,
             policy_version: str, body: dict) -> dict:
    return {
        "decision_id": decision_id(entity["key"], decision_type, window_end_ms, policy_version),
        "sequence": sequence,
        "entity": entity,
        "decision_type": decision_type,
        "window_start_ms": window_start_ms,
        "window_end_ms": window_end_ms,
        "policy_version": policy_version,
        **body,
    }


def _rounded(value: Any) -> Any:
    # Rounding hides float noise of summation order, which may differ between runs of the same input.
    if isinstance(value, float):
        return round(value, FLOAT_DIGITS)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def encode(decision: dict) -> str:
    """Canonical JSON: sorted keys, no spaces, floats to 6 decimals; NaN/Infinity are refused."""
    return json.dumps(_rounded(decision), sort_keys=True, separators=(",", ":"), allow_nan=False)
