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
    "edges": ("pipeline", "topology", "edges_topic"),
    "service_windows": ("pipeline", "topology", "service_windows_topic"),
    "error_breaks": ("pipeline", "topology", "error_breaks_topic"),
    "latency_stages": ("pipeline", "topology", "latency_stages_topic"),
    "span_instances": ("pipeline", "topology", "span_instances_topic"),
    "suspects": ("pipeline", "suspects", "suspects_topic"),
    "topology_snapshots": ("pipeline", "suspects", "topology_snapshots_topic"),
    "edge_events": ("pipeline", "suspects", "edge_events_topic"),
    "policy": ("pipeline", "policy", "topic"),
    "metrics": ("pipeline", "health", "metrics_topic"),
    "otlp_metrics": ("pipeline", "health", "otlp_metrics_topic"),
    "instance_windows": ("pipeline", "health", "instance_windows_topic"),
    "health": ("pipeline", "health", "health_topic"),
    "breaker_decisions": ("pipeline", "health", "breaker_topic"),
    "retry_decisions": ("pipeline", "health", "retry_topic"),
    "storm_decisions": ("pipeline", "health", "storm_topic"),
    "pareto_fronts": ("pipeline", "scaling", "fronts_topic"),
    "scaling_decisions": ("pipeline", "scaling", "scaling_topic"),
}
# Output tables: (placeholder of their options, topic role).
OUTPUTS = {
    "spans_options": "sink",
    "dead_letters_options": "dead_letters",
    "edges_options": "edges",
    "service_windows_options": "service_windows",
    "error_breaks_options": "error_breaks",
    "latency_stages_options": "latency_stages",
    "span_instances_options": "span_instances",
    "suspects_options": "suspects",
    "topology_snapshots_options": "topology_snapshots",
    "edge_events_options": "edge_events",
    "policy_options": "policy",
    "metrics_options": "metrics",
    "otlp_metrics_options": "otlp_metrics",
    "instance_windows_options": "instance_windows",
    "health_options": "health",
    "breaker_decisions_options": "breaker_decisions",
    "retry_decisions_options": "retry_decisions",
    "storm_decisions_options": "storm_decisions",
    "pareto_fronts_options": "pareto_fronts",
    "scaling_decisions_options": "scaling_decisions",
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


def interval(seconds: int | float) -> str:
    """A Flink SQL interval literal of whole seconds. DAY TO SECOND: `INTERVAL 'n' SECOND` only
    takes two digits, and Flink rejects a wider precision."""
    total = int(seconds)
    if total != seconds or total < 0:
        raise ValueError(f"an interval must be a whole, non-negative number of seconds, not {seconds!r}")
    days, rest = divmod(total, 86400)
    return f"INTERVAL '{days} {rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}' DAY TO SECOND"


def variables(
    config: Config,
    topic_names: dict[str, str],
    source: dict[str, str],
    read_with: dict[str, dict[str, str]] | None = None,
) -> dict[str, object]:
    """Placeholder values for every file under sql/tables and sql/views.

    `source` holds the Kafka source options of the input (group id, startup and bounded mode);
    `read_with` the same for each output table (by topic role) that is read rather than written:
    a later job's input, the SQL client's queries. A table a job only writes gets none.
    """
    spans = config.section("pipeline", "spans")
    topology = config.section("pipeline", "topology")
    reading = read_with or {}
    return {
        "source_topic": topic_names["source"],
        "sink_topic": topic_names["sink"],
        "source_options": table_options(config, topic_names["source"], **source),
        **{key: table_options(config, topic_names[role], **reading.get(role, {})) for key, role in OUTPUTS.items()},
        "watermark_out_of_orderness": interval(spans["watermark_out_of_orderness_seconds"]),
        "spans_idle_timeout": f"{int(spans['idle_timeout_seconds'])} s",
        "span_figures_idle_timeout": f"{int(config.get('pipeline', 'health', 'span_figures_idle_timeout_seconds'))} s",
        # How the source topic's messages are encoded (tables/otlp_spans.sql, the `otlp` format).
        "spans_encoding": spans["encoding"],
        "future_limit_seconds": int(spans["future_limit_seconds"]),
        "dead_letter_payload_max_chars": int(config.get("pipeline", "dead_letters", "payload_max_chars")),
        "window_size": interval(topology["window_size_seconds"]),
        "window_slide": interval(topology["window_slide_seconds"]),
        "edge_tumbling_window": interval(topology["edge_tumbling_window_seconds"]),
        "latency_bucket_bounds_ms": ", ".join(f"{float(b)!r}" for b in topology["latency_bucket_bounds_ms"]),
        # The same in seconds, OTLP's unit of durations: b / 1000 is the double nearest the decimal, as
        # a bound an exporter wrote in seconds is read, so equal bounds compare equal.
        "latency_bucket_bounds_s": ", ".join(f"{float(b) / 1000!r}" for b in topology["latency_bucket_bounds_ms"]),
    }
