"""What one window record on Kafka tells the decision logic: the rows of stormwatch_instance_windows
and stormwatch_edges as entities with their health inputs. Pure; jobs/health.py feeds it.

Entity keys are what the decision topics are keyed by: "service:NAME", "instance:SERVICE/ID",
"edge:CALLER->CALLEE".
"""

from __future__ import annotations

from stormwatch.health import HealthInputs
from stormwatch.histograms import quantile_from_cumulative
from stormwatch.pareto import InstancePoint


def window_entity_key(row: dict) -> str:
    if "caller" in row:
        return f"edge:{row['caller']}->{row['callee']}"
    if row.get("instance") is None:
        return f"service:{row['service']}"
    return f"instance:{row['service']}/{row['instance']}"


def _quantile(row: dict, spans_field: str, metrics_field: str, q: float) -> float | None:
    """From the spans' exact percentile where the window has spans, else the instances' own reported
    quantile, else interpolated from the merged histogram buckets."""
    if row.get(spans_field) is not None:
        return row[spans_field]
    if row.get(metrics_field) is not None:
        return row[metrics_field]
    # No spans: the buckets are the metrics' alone, and `calls` counts the requests past the last bound too.
    return quantile_from_cumulative(row["latency_bucket_bounds_ms"], row["latency_buckets"], q, total=int(row["calls"]))


def health_inputs(row: dict) -> HealthInputs:
    key = window_entity_key(row)
    common = dict(entity_key=key, window_start_ms=int(row["window_start_ms"]), window_end_ms=int(row["window_end_ms"]))
    if key.startswith("edge:"):
        # A caller's view of its callee: failures on either side count against the call.
        return HealthInputs(
            entity_kind="edge", service=row["callee"], instance=None, caller=row["caller"], callee=row["callee"],
            calls=int(row["calls"]), errors=int(row["client_errors"]) + int(row["server_errors"]),
            p50_ms=row["latency_p50_ms"], p95_ms=row["latency_p95_ms"], p99_ms=row["latency_p99_ms"],
            load_ratio=None,
            example_trace_ids=sorted({t for t in (row.get("example_error_trace_id"), row.get("example_trace_id")) if t}),
            retries=_count(row.get("retries")), logical_calls=_count(row.get("logical_calls")),
            **common)
    return HealthInputs(
        entity_kind="instance" if key.startswith("instance:") else "service",
        service=row["service"], instance=row.get("instance"), caller=None, callee=None,
        calls=int(row["calls"]), errors=int(row["errors"]),
        p50_ms=_quantile(row, "span_p50_ms", "metric_p50_ms", 0.5),
        p95_ms=_quantile(row, "span_p95_ms", "metric_p95_ms", 0.95),
        p99_ms=_quantile(row, "span_p99_ms", "metric_p99_ms", 0.99),
        load_ratio=row.get("load_ratio"),
        example_trace_ids=sorted({t for t in (row.get("example_error_trace_id"), row.get("example_trace_id")) if t}),
        **common)


def _count(value) -> int | None:
    return None if value is None else int(value)


def instance_points(rows: list[dict], window_seconds: float, quantile: str, first_seen_ms: dict[str, int]):
    """A service window's instance rows as Pareto points: QPS over the window, latency at `quantile`
    ("p99" or "p95"); `first_seen_ms` says since when each instance has been seen (warm-up)."""
    q = {"p99": 0.99, "p95": 0.95}[quantile]
    return [
        InstancePoint(instance=r["instance"], qps=int(r["calls"]) / window_seconds,
                      latency_ms=_quantile(r, f"span_{quantile}_ms", f"metric_{quantile}_ms", q),
                      calls=int(r["calls"]), first_seen_ms=first_seen_ms[r["instance"]])
        for r in sorted(rows, key=lambda r: r["instance"])
    ]
