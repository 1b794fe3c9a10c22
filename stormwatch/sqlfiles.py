"""Loading the SQL in sql/: `${name}` placeholders filled from the job, ATTRIBUTE_STRING (and
INSTANCE_ID) expanded.

SQL stays in files a user can read and run; this module only fills in what depends on the
configuration (topics, brokers, watermarks) and splits a file into statements.

The Kafka options of every table (connector, topic, brokers, [kafka.properties]) come from one place,
connectors/kafka.table_options through stormwatch/catalog.py, as `${<role>_options}`. The rest of a
table's WITH (...) (its format, key fields), its Kafka metadata columns and its watermark stay written
out in each file, alike as they are from table to table: they say how that topic's records are read,
which is what a user opening the file before querying the table needs to see.
"""

from __future__ import annotations

import re

from stormwatch.config import PROJECT_ROOT
from stormwatch.decisions import ENVELOPE_SQL_COLUMNS

SQL_DIR = PROJECT_ROOT / "sql"

# How many entries of an OTLP attribute list ATTRIBUTE_STRING looks at. Resources and spans from
# OTel SDKs carry well under this; a key past it reads as absent.
ATTRIBUTE_SCAN_LIMIT = 32

# Only the braced form: `$` alone is common in SQL regular expressions.
_PLACEHOLDER = re.compile(r"\$\{([a-z_][a-z0-9_]*)\}")
_CUMULATIVE_CALL = re.compile(r"CUMULATIVE_COUNTS\(\s*([^,()]+?)\s*,\s*([0-9.eE+\-\s,]+?)\s*\)")
_INDICATORS_CALL = re.compile(r"CUMULATIVE_INDICATORS\(\s*([^,()]+?)\s*,\s*([0-9.eE+\-\s,]+?)\s*\)")
_SUM_ELEMENTS_CALL = re.compile(r"SUM_ELEMENTS\(\s*([^,()]+?)\s*,\s*([0-9]+)\s*\)")
_ENVELOPE_LINE = re.compile(r"^(\s*)DECISION_ENVELOPE,\s*$", re.M)
_ATTRIBUTE_CALL = re.compile(r"ATTRIBUTE_STRING\(\s*([^,()]+?)\s*,\s*'([^']*)'\s*\)")
_INSTANCE_CALL = re.compile(r"\bINSTANCE_ID\(\s*([^,()]+?)\s*\)")
# Which resource attribute names an instance, first found first: spans and metrics of one process agree.
INSTANCE_ATTRIBUTES = ("service.instance.id", "k8s.pod.name", "host.name")


class SqlTemplateError(KeyError):
    pass


def expand_attribute_lookups(sql: str, limit: int = ATTRIBUTE_SCAN_LIMIT) -> str:
    """ATTRIBUTE_STRING(list, 'k') -> the stringValue of the first entry whose key is 'k', else NULL."""

    def lookup(match: re.Match) -> str:
        array, key = match.group(1), match.group(2)
        branches = " ".join(
            f"WHEN {array}[{i}].`key` = '{key}' THEN {array}[{i}].`value`.`stringValue`" for i in range(1, limit + 1)
        )
        return f"(CASE {branches} END)"

    return _ATTRIBUTE_CALL.sub(lookup, sql)


def expand_instance_ids(sql: str) -> str:
    """INSTANCE_ID(resource attributes) -> the first of INSTANCE_ATTRIBUTES the resource has, else NULL."""

    def first(match: re.Match) -> str:
        return "COALESCE(" + ", ".join(f"ATTRIBUTE_STRING({match.group(1)}, '{key}')" for key in INSTANCE_ATTRIBUTES) + ")"

    return _INSTANCE_CALL.sub(first, sql)


def expand_cumulative_counts(sql: str) -> str:
    """CUMULATIVE_COUNTS(x, b1, b2, ...) -> ARRAY[count of x <= b1, count of x <= b2, ...], inside an
    aggregate: histogram buckets computed on the JVM, as Prometheus' cumulative `le` buckets."""

    def counts(match: re.Match) -> str:
        value, bounds = match.group(1), [b.strip() for b in match.group(2).split(",")]
        return "ARRAY[" + ", ".join(
            f"CAST(SUM(CASE WHEN {value} <= {b} THEN 1 ELSE 0 END) AS BIGINT)" for b in bounds
        ) + "]"

    return _CUMULATIVE_CALL.sub(counts, sql)


def expand_bucket_arrays(sql: str) -> str:
    """The two halves of CUMULATIVE_COUNTS, for histograms merged from rows that carry their own
    counts (a metrics record's buckets beside single spans):
    CUMULATIVE_INDICATORS(x, b1, ...) -> ARRAY[1 if x <= b1 else 0, ...] for one row, and
    SUM_ELEMENTS(a, n) -> ARRAY[SUM(a[1]), ..., SUM(a[n])] inside an aggregate."""

    def indicators(match: re.Match) -> str:
        value, bounds = match.group(1), [b.strip() for b in match.group(2).split(",")]
        return "ARRAY[" + ", ".join(f"CAST(CASE WHEN {value} <= {b} THEN 1 ELSE 0 END AS BIGINT)" for b in bounds) + "]"

    def sums(match: re.Match) -> str:
        array, n = match.group(1), int(match.group(2))
        return "ARRAY[" + ", ".join(f"CAST(COALESCE(SUM({array}[{i}]), 0) AS BIGINT)" for i in range(1, n + 1)) + "]"

    return _SUM_ELEMENTS_CALL.sub(sums, _INDICATORS_CALL.sub(indicators, sql))


def expand_decision_envelope(sql: str) -> str:
    """A line `DECISION_ENVELOPE,` in a CREATE TABLE -> the envelope columns every decision topic
    shares (stormwatch/decisions.py), then the record's Kafka partition and offset."""

    def columns(match: re.Match) -> str:
        indent = match.group(1)
        lines = [f"`{name}` {sql_type}," for name, sql_type in ENVELOPE_SQL_COLUMNS] + [
            "`kafka_partition` INT METADATA FROM 'partition' VIRTUAL,",
            "`kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,",
        ]
        return "\n".join(indent + line for line in lines)

    return _ENVELOPE_LINE.sub(columns, sql)


def render(name: str, variables: dict[str, object] | None = None) -> str:
    """The text of sql/<name>.sql with every placeholder filled; a missing value is an error."""
    path = SQL_DIR / f"{name}.sql"
    text = path.read_text()
    values = variables or {}

    def fill(match: re.Match) -> str:
        if match.group(1) not in values:
            raise SqlTemplateError(f"{path}: no value for placeholder ${{{match.group(1)}}}")
        return str(values[match.group(1)])

    text = expand_decision_envelope(_PLACEHOLDER.sub(fill, text))
    return expand_bucket_arrays(expand_cumulative_counts(expand_attribute_lookups(expand_instance_ids(text))))


def statements(sql: str) -> list[str]:
    """Split on the `;` that ends a line; our files keep semicolons out of literals and comments."""
    parts = re.split(r";\s*(?:\n|$)", sql)
    return [p.strip() for p in parts if _has_code(p)]


def _has_code(part: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in part.splitlines())


def load_statements(names: list[str], variables: dict[str, object] | None = None) -> list[str]:
    return [stmt for name in names for stmt in statements(render(name, variables))]
