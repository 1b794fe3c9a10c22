"""Reading policy documents: a value of a table as a number, a share, or the table itself with exactly
the keys it should have. Each error names the offending `section.key`, so every policy (health, breaker,
retry gate, Pareto front, scaling) reports a bad file the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def positive_number(d: Mapping[str, Any], key: str, section: str, *, integer: bool = False,
                    allow_zero: bool = False) -> float:
    """d[key] as a number > 0 (≥ 0 with allow_zero); ValueError naming `section.key` otherwise."""
    value = d.get(key)
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ValueError(f"{section}.{key}: expected {'an integer' if integer else 'a number'}, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{section}.{key}: must be {'≥' if allow_zero else '>'} 0, got {value!r}")
    return value


def share(d: Mapping[str, Any], key: str, section: str) -> float:
    """d[key] as a number on [0, 1]; ValueError naming `section.key` otherwise."""
    value = positive_number(d, key, section, allow_zero=True)
    if value > 1:
        raise ValueError(f"{section}.{key}: must be on [0, 1], got {value!r}")
    return float(value)


def section_of(d: Any, section: str, keys: Sequence[str]) -> Mapping[str, Any]:
    """d as a mapping with no key outside `keys` (a misspelt threshold must not be silently ignored)."""
    if not isinstance(d, Mapping):
        raise ValueError(f"{section}: expected a table, got {type(d).__name__}")
    unknown = sorted(set(d) - set(keys))
    if unknown:
        raise ValueError(f"{section}.{unknown[0]}: unknown key (known: {', '.join(keys)})")
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{section}.{missing[0]}: missing")
    return d
