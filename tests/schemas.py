"""The JSON Schemas of the output topics' values (schemas/<topic>.schema.json), for tests to check
what the jobs wrote: `assert_valid("stormwatch_edges", read_topic(config, names["edges"], 4))`."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator

from stormwatch.config import PROJECT_ROOT

SCHEMA_DIR = PROJECT_ROOT / "schemas"


def schema_path(topic: str) -> Path:
    return SCHEMA_DIR / f"{topic}.schema.json"


@cache
def validator(topic: str) -> Draft202012Validator:
    """`topic` as config/stormwatch.toml names it (the schema's name), whatever a test's own copy is called."""
    path = schema_path(topic)
    if not path.exists():
        raise AssertionError(f"no schema for topic {topic!r}: {path} does not exist")
    schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def assert_valid(topic: str, records: list[dict]) -> None:
    """Every record validates against the topic's value schema; the `key` entry that
    tests/conftest.py's read_topic adds to each record is not part of the value and is ignored."""
    check = validator(topic)
    problems = []
    for index, record in enumerate(records):
        value = {k: v for k, v in record.items() if k != "key"}
        for error in sorted(check.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path]):
            where = "/".join(str(p) for p in error.absolute_path) or "(the record)"
            problems.append(f"record {index}, at {where}: {error.message}")
    if problems:
        raise AssertionError(f"{len(problems)} schema violation(s) in {topic} ({schema_path(topic).name}):\n  "
                             + "\n  ".join(problems))
