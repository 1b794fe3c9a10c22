"""OTLP metrics (otlp_metrics, as the Collector's kafka exporter writes them) through the real Kafka and
Flink: the same generated traffic's metrics sent natively and sent as OTLP give the health job the same
instance windows and health, and what cannot be used reaches the dead letters with its reason."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import datetime, timezone
from itertools import groupby

import pytest

from connectors.kafka import create_topics
from connectors.otlp import encode_json
from stormwatch.replay import produce
from stormwatch.traffic.generator import TraceGenerator
from stormwatch.traffic.metrics import MetricsSettings, otlp_metrics_request
from stormwatch.traffic.otlp import to_export_requests
from tests.conftest import live_job, read_topic, run_bounded
from tests.integration.test_health_pipeline import ROLES
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

END_S = 240
# The OTLP histogram carries no quantiles; the native records leave them out too, so both carry the same.
SETTINGS = MetricsSettings(interval_s=10, bounds_ms=(5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500,
                                                     10000), quantiles=False)
# Each run's own outputs; the spans (flattened once) and the edge and policy topics are shared.
OUTPUTS = ("dead_letters", "instance_windows", "health", "breaker_decisions", "retry_decisions", "storm_decisions")


def _resource(request: dict, service: str) -> dict:
    """A copy of the request's first resource of `service`, alone in a request of its own."""
    rm = next(r for r in request["resourceMetrics"]
              if {"key": "service.name", "value": {"stringValue": service}} in r["resource"]["attributes"])
    return {"resourceMetrics": [copy.deepcopy(rm)]}


def _histogram(request: dict) -> dict:
    [rm] = request["resourceMetrics"]
    return next(m for m in rm["scopeMetrics"][0]["metrics"] if "histogram" in m)


def _hostile(requests: list[dict]) -> list[tuple[bytes, str]]:
    """Unusable messages, each with the reason its dead letter must give; none of them late."""
    last = requests[-1]
    no_service = _resource(last, "gateway")
    attributes = no_service["resourceMetrics"][0]["resource"]["attributes"]
    attributes[:] = [a for a in attributes if a["key"] != "service.name"]
    short_buckets = _resource(last, "orchestrator")
    _histogram(short_buckets)["histogram"]["dataPoints"][0]["bucketCounts"].pop()
    cumulative = _resource(last, "retrieval")
    _histogram(cumulative)["histogram"]["aggregationTemporality"] = 2
    return [
        (b"this is not json", "not a JSON object"),
        (b'{"resourceMetrics": 3}', "no resourceMetrics array: not an OTLP ExportMetricsServiceRequest"),
        (encode_json(no_service), "resource has no service.name attribute"),
        (encode_json(short_buckets), "data point malformed: explicitBounds must ascend and bucketCounts have one entry more"),
        (encode_json(cumulative), "is not in delta temporality"),
    ]


@pytest.fixture(scope="module")
def both(config, kafka):
    suffix = uuid.uuid4().hex[:8]
    shared = {role: f"test_{role}_{suffix}" for role in ROLES}
    native = shared | {role: f"{shared[role]}_native" for role in (*OUTPUTS, "otlp_metrics")}
    otlp = shared | {role: f"{shared[role]}_otlp" for role in (*OUTPUTS, "metrics")}
    create_topics(config, {name: {"partitions": 2} for name in {*native.values(), *otlp.values()}})

    generator = TraceGenerator(seed=7, metrics=SETTINGS)
    spans = sorted((s for t in generator.generate(5.0, END_S) for s in t), key=lambda s: s.end_unix_nano)
    intervals = generator.metrics(final=True)
    requests = [otlp_metrics_request(group) for _, group in groupby(intervals, key=lambda i: i.end_unix_nano)]
    hostile = _hostile(requests)
    produce(config, shared["source"], [encode_json(r) for r in to_export_requests(spans)], partition=0)
    produce(config, native["metrics"], [json.dumps(i.record()).encode() for i in intervals], partition=0)
    produce(config, otlp["otlp_metrics"], [encode_json(r) for r in requests] + [m for m, _ in hostile], partition=0)

    run_bounded(shared, ["spans"])
    run_bounded(native, ["health"])
    run_bounded(otlp, ["health"])
    read = {(run, role): read_topic(config, names[role], 1, timeout=60)
            for run, names in (("native", native), ("otlp", otlp)) for role in ("instance_windows", "health")}
    read |= {(run, "dead_letters"): read_topic(config, names["dead_letters"], 0, timeout=20)
             for run, names in (("native", native), ("otlp", otlp))}
    return {"read": read, "hostile": hostile, "otlp": otlp, "requests": requests, "intervals": intervals}


def _windows(records: list[dict]) -> list[str]:
    """Comparable records: a service's averages over its instances add up in arrival order, which two
    runs need not share, so floats are compared to 9 places (they differ in the last bit)."""
    def rounded(v):
        return round(v, 9) if isinstance(v, float) else v
    return sorted(json.dumps({**{k: rounded(v) for k, v in r.items()}, "key": r["key"].decode()}, sort_keys=True)
                  for r in records)


def test_otlp_metrics_give_the_same_instance_windows_as_native_ones(both):
    native, otlp = both["read"]["native", "instance_windows"], both["read"]["otlp", "instance_windows"]
    assert_valid("stormwatch_instance_windows", otlp)
    from_metrics = [w for w in native if w["metric_records"] > 0]
    # Every instance's windows came from its metrics, and load figures are in them.
    assert {w["instance"] for w in from_metrics} >= {i.info.instance for i in both["intervals"]}
    assert any(w["load_ratio"] for w in from_metrics) and any(w["in_flight_max"] for w in from_metrics)
    assert any(w["errors"] for w in from_metrics)
    assert _windows(otlp) == _windows(native)


def test_otlp_metrics_give_the_same_health_as_native_ones(both):
    native, otlp = both["read"]["native", "health"], both["read"]["otlp", "health"]
    assert native and _windows(otlp) == _windows(native)


def test_unusable_otlp_messages_reach_the_dead_letters_with_their_reason(both):
    letters = both["read"]["otlp", "dead_letters"]
    assert_valid("stormwatch_dead_letters", letters)
    assert {d["source_topic"] for d in letters} == {both["otlp"]["otlp_metrics"]}
    assert {d["job"] for d in letters} == {"health"}
    reasons = [d["reason"] for d in letters]
    for _, reason in both["hostile"]:
        assert sum(reason in r for r in reasons) == 1, (reason, reasons)
    assert len(letters) == len(both["hostile"]), reasons
    assert not both["read"]["native", "dead_letters"]


def test_a_late_otlp_message_reaches_the_dead_letters_not_a_closed_window(config, both, topics_for):
    """Live, as the topology test does it for spans: only a running job has closed windows to be late for."""
    from connectors.kafka import producer

    names = both["otlp"] | topics_for(("otlp_metrics", *OUTPUTS))
    produce(config, names["otlp_metrics"], [encode_json(r) for r in both["requests"]], partition=0)
    client = producer(config)
    try:
        with live_job("health", names, "--from-earliest", "--group-id", f"late-{names['otlp_metrics']}"):
            assert read_topic(config, names["instance_windows"], 1, timeout=180), "windows closed"
            # The first interval again: its windows closed long ago.
            client.send(names["otlp_metrics"], value=encode_json(both["requests"][0]), partition=0)
            client.flush()
            dead = read_topic(config, names["dead_letters"], 1, timeout=90)
    finally:
        client.close()
    assert_valid("stormwatch_dead_letters", dead)
    assert len(dead) == 1, dead
    assert dead[0]["reason"].startswith("late metrics message: behind the watermark")
    assert dead[0]["source_topic"] == names["otlp_metrics"] and dead[0]["job"] == "health"
    first = datetime.fromtimestamp(both["intervals"][0].end_unix_nano / 1e9, timezone.utc)
    assert json.loads(dead[0]["payload"]) == {"event_time": first.strftime("%Y-%m-%d %H:%M:%S.000")}
