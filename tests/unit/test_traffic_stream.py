"""Generated traffic as sent messages (stormwatch/traffic/stream.py) and its per-instance metrics
(stormwatch/traffic/metrics.py): send order, Collector-like span batches, metrics consistent with the spans."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from reference.otlp import spans_of_request
from stormwatch.traffic.faults import FaultWindow
from stormwatch.traffic.generator import TraceGenerator
from stormwatch.traffic.metrics import MetricsSettings
from stormwatch.traffic.stream import outputs
from stormwatch.traffic.topology import DEFAULT_TOPOLOGY

SERVER = 2
RATE, DURATION_S, BATCH_MS, MAX_SPANS = 4.0, 35.0, 1000, 24
BATCH_NS = BATCH_MS * 1_000_000
SETTINGS = MetricsSettings(interval_s=10, bounds_ms=(5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000))
# Failures and retries, so error counts and error.type points are exercised.
FAULT = FaultWindow(service="llm-inference", start_s=5, end_s=20, error_rate=0.4, delay_ms=300)
TRANSPORT = {s.name: s.transport for s in DEFAULT_TOPOLOGY.services}


def _generator(seed: int = 3) -> TraceGenerator:
    return TraceGenerator(seed=seed, faults=[FAULT], metrics=SETTINGS)


def _run(metrics_format: str | None = "native", seed: int = 3) -> list:
    return list(outputs(_generator(seed), RATE, DURATION_S, BATCH_MS, MAX_SPANS, metrics_format))


@pytest.fixture(scope="module")
def native():
    return _run("native")


@pytest.fixture(scope="module")
def generated_spans():
    """Every span of the run, from a second generator with the same seed."""
    return [span for trace in _generator().generate(RATE, DURATION_S) for span in trace]


def _span_messages(out):
    return [(o, spans_of_request(o.value)) for o in out if o.kind == "spans"]


def _attributes(item: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in item.get("attributes", [])}


def test_outputs_are_in_send_time_order_spans_before_metrics_of_the_same_moment(native):
    assert [(o.time_unix_nano, o.kind != "spans") for o in native] == sorted(
        (o.time_unix_nano, o.kind != "spans") for o in native)
    assert {o.kind for o in native} == {"spans", "metrics"}


def test_every_generated_span_is_sent_exactly_once(native, generated_spans):
    sent = Counter((s.trace_id, s.span_id) for _, spans in _span_messages(native) for s in spans)
    assert sent == Counter((s.trace_id, s.span_id) for s in generated_spans)
    assert sum(o.spans for o in native if o.kind == "spans") == len(generated_spans)


def test_span_messages_hold_at_most_max_spans_and_say_how_many(native):
    sizes = [(o.spans, len(spans)) for o, spans in _span_messages(native)]
    assert all(declared == actual <= MAX_SPANS for declared, actual in sizes)
    assert any(actual == MAX_SPANS for _, actual in sizes), "no batch was large enough to be split"


def test_a_span_is_sent_at_the_close_of_its_batch_window(native):
    for output, spans in _span_messages(native):
        assert output.time_unix_nano % BATCH_NS == 0
        assert all(output.time_unix_nano - BATCH_NS <= s.end < output.time_unix_nano for s in spans)


def test_a_message_is_let_out_only_once_the_generator_clock_passed_its_time():
    generator = _generator()
    generating, done = generator.generate, []

    def watched(*args):
        yield from generating(*args)
        done.append(True)

    generator.generate = watched
    for output in outputs(generator, RATE, DURATION_S, BATCH_MS, MAX_SPANS, "native"):
        # Before the run is over, a later trace could still add a span to a batch (or an interval) not yet passed.
        assert done or output.time_unix_nano <= generator.clock_unix_nano


def _server_spans_by_interval(native, generated_spans):
    """(instance, interval end) -> the SERVER spans ending in that interval, by the records' own intervals."""
    records = [o.value for o in native if o.kind == "metrics"]
    out = defaultdict(list)
    for span in generated_spans:
        if span.kind == SERVER:
            [record] = [r for r in records if r["service_instance_id"] == span.instance
                        and r["start_time_unix_nano"] <= span.end_unix_nano < r["time_unix_nano"]]
            out[(span.instance, record["time_unix_nano"])].append(span)
    return records, out


def test_native_records_add_up_to_the_server_spans_of_their_instance_and_interval(native, generated_spans):
    records, spans = _server_spans_by_interval(native, generated_spans)
    for record in records:
        mine = spans[(record["service_instance_id"], record["time_unix_nano"])]
        assert record["requests"] == len(mine)
        assert record["errors"] == sum(s.status_code == 2 for s in mine)
        assert sum(record["latency_bucket_counts"]) == len(mine)
        assert record["service_instance_id"].startswith(record["service_name"] + "-")
    assert sum(r["errors"] for r in records) > 0
    assert sum(r["requests"] for r in records) == sum(map(len, spans.values()))


def test_native_records_are_one_per_instance_and_interval_aligned_and_keyed_by_instance(native):
    metrics = [o for o in native if o.kind == "metrics"]
    instances = {f"{s.name}-{i}" for s in DEFAULT_TOPOLOGY.services for i in range(len(s.instances))}
    by_end = defaultdict(list)
    for o in metrics:
        assert o.key == {"service_name": o.value["service_name"], "service_instance_id": o.value["service_instance_id"]}
        assert o.time_unix_nano == o.value["time_unix_nano"]
        by_end[o.time_unix_nano].append(o.value["service_instance_id"])
    assert all(sorted(names) == sorted(instances) for names in by_end.values())
    ends = sorted(by_end)
    assert all(end % 10**10 == 0 for end in ends)
    assert len(ends) >= DURATION_S // SETTINGS.interval_s


def test_metrics_come_after_every_span_that_ended_in_their_interval(native):
    for i, output in enumerate(native):
        if output.kind == "metrics":
            later = [s.end for o in native[i + 1:] if o.kind == "spans" for s in spans_of_request(o.value)]
            assert all(end >= output.time_unix_nano for end in later)



def test_metrics_stop_with_the_interval_of_the_last_span():
    # An overloaded llm-inference keeps working for callers that gave up: that must not keep a run of
    # a given duration reporting intervals of no request.
    storm = FaultWindow(service="llm-inference", start_s=5, end_s=DURATION_S, capacity_factor=0.1)
    out = list(outputs(TraceGenerator(seed=3, faults=[storm], metrics=SETTINGS), RATE, DURATION_S, BATCH_MS,
                       MAX_SPANS, "native"))
    last_span_end = max(s.end for o in out if o.kind == "spans" for s in spans_of_request(o.value))
    last_metrics = max(o.time_unix_nano for o in out if o.kind == "metrics")
    assert last_metrics - last_span_end <= SETTINGS.interval_s * 1e9

def _otlp_points(request: dict) -> dict:
    """(instance, interval end) -> {metric name: metric} of an ExportMetricsServiceRequest."""
    out = {}
    for rm in request["resourceMetrics"]:
        resource = _attributes(rm["resource"])
        [scope] = rm["scopeMetrics"]
        metrics = {m["name"]: m for m in scope["metrics"]}
        any_point = next(iter(metrics.values()))
        end = int((any_point.get("gauge") or any_point.get("histogram"))["dataPoints"][0]["timeUnixNano"])
        out[(resource["service.instance.id"], end)] = (resource["service.name"], metrics)
    return out


def test_otlp_metrics_carry_the_native_numbers_under_otel_names_with_delta_temporality(native):
    records = {(o.value["service_instance_id"], o.value["time_unix_nano"]): o.value
               for o in native if o.kind == "metrics"}
    otlp = [o for o in _run("otlp") if o.kind == "metrics"]
    points = {k: v for o in otlp for k, v in _otlp_points(o.value).items()}
    assert points.keys() == records.keys()
    assert len(otlp) == len({end for _, end in records})  # one request per interval
    for key, (service, metrics) in points.items():
        record = records[key]
        duration = {"http": "http.server.request.duration", "grpc": "rpc.server.call.duration"}[TRANSPORT[service]]
        assert set(metrics) == {duration, "stormwatch.server.active_requests.max", "stormwatch.server.concurrency_limit",
                                "stormwatch.server.capacity", "process.cpu.utilization"}
        histogram = metrics[duration]
        assert (histogram["unit"], histogram["histogram"]["aggregationTemporality"]) == ("s", 1)
        data = histogram["histogram"]["dataPoints"]
        assert sum(int(p["count"]) for p in data) == record["requests"]
        assert sum(int(p["count"]) for p in data if "error.type" in _attributes(p)) == record["errors"]
        assert all(sum(map(int, p["bucketCounts"])) == int(p["count"]) for p in data)
        assert data[0]["explicitBounds"] == [b / 1000 for b in SETTINGS.bounds_ms]
        assert {int(p["startTimeUnixNano"]) for p in data} == {record["start_time_unix_nano"]}
        gauges = {name: next(iter(m["gauge"]["dataPoints"][0][v] for v in ("asInt", "asDouble")
                                  if v in m["gauge"]["dataPoints"][0]))
                  for name, m in metrics.items() if "gauge" in m}
        assert float(gauges["stormwatch.server.active_requests.max"]) == record["in_flight"]
        assert float(gauges["stormwatch.server.concurrency_limit"]) == record["concurrency_limit"]
        assert float(gauges["stormwatch.server.capacity"]) == record["capacity_rps"]
        assert float(gauges["process.cpu.utilization"]) == record["cpu_utilization"]
    assert any("error.type" in _attributes(p) for _, ms in points.values() for m in ms.values()
               for p in m.get("histogram", {}).get("dataPoints", []))


def test_the_same_seed_gives_identical_outputs_another_seed_others(native):
    assert _run("native") == native
    assert _run("native", seed=4) != native


def test_without_a_metrics_format_only_spans_are_sent(native):
    assert _run(None) == [o for o in native if o.kind == "spans"]


def test_each_batch_is_spread_over_the_partitions_by_trace(generated_spans):
    """Every partition has a message of each batch that holds that many traces; a trace's spans of one
    batch travel together; nothing is lost or sent twice."""
    out = [o for o in outputs(_generator(), RATE, DURATION_S, BATCH_MS, MAX_SPANS, None, partitions=3)]
    by_batch: dict[int, list] = defaultdict(list)
    for o, spans in _span_messages(out):
        by_batch[o.time_unix_nano].append((o.partition, spans))
    for batch in by_batch.values():
        traces = {s.trace_id for _, spans in batch for s in spans}
        assert {p for p, _ in batch} == set(range(min(3, len(traces))))
        placed = defaultdict(set)
        for partition, spans in batch:
            for s in spans:
                placed[s.trace_id].add(partition)
        assert all(len(p) == 1 for p in placed.values())
    assert Counter((s.trace_id, s.span_id) for _, spans in _span_messages(out) for s in spans) == Counter(
        (s.trace_id, s.span_id) for s in generated_spans)
    assert all(o.partition is None for o in _run(None))
