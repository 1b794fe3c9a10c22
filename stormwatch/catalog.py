"""What fills the placeholders of the table files in sql/: one place for topics and their options.

A job and the SQL client see the same tables; only the topics (a test's own, say) and how the
source is read (group offsets, bounded) differ.
"""

from __future__ import annotations

from connectors.kafka import table_options
from stormwatch.config import Config

# The role of each topic in the SQL files, and where the configuration names it.
TOPIC_ROLES = {
    "source": ("pipeline", "spans", "source_topic"),
    "sink": ("pipeline", "spans", "sink_topic"),
    "dead_letters": ("pipeline", "dead_letters", "topic"),
}


def parse_topic_overrides(items: list[str]) -> dict[str, str]:
    """`--topic ROLE=NAME` arguments as {role: name}."""
    out = {}
    for item in items:
        role, sep, name = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--topic expects ROLE=NAME, got {item!r}")
        out[role] = name
    return out


def topics(config: Config, overrides: dict[str, str] | None = None) -> dict[str, str]:
    unknown = set(overrides or {}) - TOPIC_ROLES.keys()
    if unknown:
        raise ValueError(f"unknown topic role(s) {sorted(unknown)}; roles: {sorted(TOPIC_ROLES)}")
    return {role: config.get(*path) for role, path in TOPIC_ROLES.items()} | (overrides or {})


def variables(
    config: Config,
    topic_names: dict[str, str],
    source: dict[str, str],
    outputs_read_with: dict[str, str] | None = None,
) -> dict[str, object]:
    """Placeholder values for every file under sql/tables and sql/views.

    `source` holds the Kafka source options of the input (group id, startup and bounded mode);
    `outputs_read_with` the same for the output tables where they are read rather than written
    (the SQL client's queries), nothing for a job writing them.
    """
    spans = config.section("pipeline", "spans")
    outputs = outputs_read_with or {}
    return {
        "source_topic": topic_names["source"],
        "source_options": table_options(config, topic_names["source"], **source),
        "spans_options": table_options(config, topic_names["sink"], **outputs),
        "dead_letters_options": table_options(config, topic_names["dead_letters"], **outputs),
        "watermark_out_of_orderness_seconds": int(spans["watermark_out_of_orderness_seconds"]),
        "dead_letter_payload_max_chars": int(config.get("pipeline", "dead_letters", "payload_max_chars")),
    }
