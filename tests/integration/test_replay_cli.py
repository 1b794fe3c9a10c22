"""`stormwatch replay` and `stormwatch generate` through the real local broker, as a user runs them."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from kafka import TopicPartition

from connectors.kafka import consumer
from stormwatch import catalog
from stormwatch.trace_formats import read_requests
from tests.conftest import read_topic, stormwatch
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

S = 1_000_000_000
T0_US = 1_674_982_200_000_000  # 2023-01-29T08:50:00Z, µs
# Two services in one batch of end time: one request each after re-batching.
ZIPKIN = [
    {"traceId": "5af7183fb1d4cf5f", "id": "352bff9a74ca9ad2", "kind": "SERVER", "name": "get /api/orders",
     "timestamp": T0_US, "duration": 1500, "localEndpoint": {"serviceName": "frontend"},
     "tags": {"http.method": "GET"}},
    {"traceId": "5af7183fb1d4cf5f", "parentId": "352bff9a74ca9ad2", "id": "6b221d5bc9e6496c", "kind": "CLIENT",
     "name": "get", "timestamp": T0_US + 100, "duration": 900, "localEndpoint": {"serviceName": "frontend"},
     "remoteEndpoint": {"serviceName": "orders"}},
    {"traceId": "5af7183fb1d4cf5f", "parentId": "6b221d5bc9e6496c", "id": "bd7a977555f6b982", "kind": "SERVER",
     "name": "get /orders", "timestamp": T0_US + 200, "duration": 600, "localEndpoint": {"serviceName": "orders"},
     "tags": {"error": "db down"}},
]


@pytest.fixture
def zipkin_file(tmp_path):
    path = tmp_path / "trace.zipkin.json"
    path.write_text(json.dumps(ZIPKIN))
    return path


def _spans(record: dict) -> list[dict]:
    return [s for rs in record["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_replay_of_a_zipkin_file_rebased_lands_otlp_requests_ending_now(config, topics_for, zipkin_file):
    topic = topics_for(("source",))["source"]
    before = time.time_ns()
    result = stormwatch("replay", "--format", "zipkin", str(zipkin_file), "--topic", topic, "--rebase")
    after = time.time_ns()
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"replayed 3 spans in 2 message(s) to {topic}" in result.stdout
    records = read_topic(config, topic, 2)
    assert len(records) == 2
    spans = {s["spanId"]: s for r in records for s in _spans(r)}
    assert set(spans) == {z["id"] for z in ZIPKIN}
    assert {s["traceId"] for s in spans.values()} == {"0000000000000000" + ZIPKIN[0]["traceId"]}
    ends = {span_id: int(s["endTimeUnixNano"]) for span_id, s in spans.items()}
    # The first span to end ends at the time of the replay; the gaps between spans are the file's
    # (as read locally: the µs -> ns conversion is tests/unit/test_trace_formats.py's concern).
    first = min(ends.values())
    assert before <= first <= after
    converted = {s["spanId"]: int(s["endTimeUnixNano"]) for r in read_requests(zipkin_file, "zipkin") for s in _spans(r)}
    assert {k: end - first for k, end in ends.items()} == {k: end - min(converted.values()) for k, end in converted.items()}


def test_replay_to_a_missing_topic_names_it_and_how_to_create_it(kafka, zipkin_file):
    topic = f"no_such_topic_{uuid.uuid4().hex[:8]}"
    result = stormwatch("replay", str(zipkin_file), "--topic", topic)
    assert result.returncode != 0
    assert topic in result.stderr and "stormwatch topics create" in result.stderr
    assert "Traceback" not in result.stderr


def _end_offsets(config, topics: list[str]) -> dict[TopicPartition, int]:
    client = consumer(config)
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in client.partitions_for_topic(t)]
        return client.end_offsets(partitions)
    finally:
        client.close()


def _records_between(config, start: dict[TopicPartition, int], end: dict[TopicPartition, int]) -> dict[str, list]:
    """topic -> [(key, value)] of the records from `start` up to `end` offsets (each partition)."""
    client = consumer(config, consumer_timeout_ms=5000)
    out: dict[str, list] = {tp.topic: [] for tp in start}
    try:
        client.assign(list(start))
        for tp, offset in start.items():
            client.seek(tp, offset)
        pending = {tp for tp in start if end[tp] > start[tp]}
        while pending:
            batch = client.poll(timeout_ms=5000)
            assert batch, f"no records arrived on {sorted(map(str, pending))}"
            for tp, messages in batch.items():
                out[tp.topic] += [(m.key, m.value) for m in messages if m.offset < end[tp]]
                if client.position(tp) >= end[tp]:
                    pending.discard(tp)
    finally:
        client.close()
    return out


def test_generate_fast_puts_span_messages_and_valid_metrics_records_on_kafka(config, kafka):
    # `generate` has no topic overrides: it writes to the configured topics, made here on the test broker.
    created = stormwatch("topics", "create")
    assert created.returncode == 0, created.stderr[-3000:]
    span_topic, metrics_topic = catalog.topics(config)["source"], catalog.topics(config)["metrics"]
    start = _end_offsets(config, [span_topic, metrics_topic])
    started = time.time_ns()
    result = stormwatch("generate", "--fast", "--duration", "20", "--rate", "5", "--schedule", "storm")
    assert result.returncode == 0, result.stderr[-3000:]
    end = _end_offsets(config, [span_topic, metrics_topic])
    assert "schedule storm" in result.stderr
    counts = re.search(r"sent ([\d,]+) spans in ([\d,]+) message\(s\) and ([\d,]+) metrics message\(s\)", result.stdout)
    assert counts, result.stdout
    spans, span_messages, metrics_messages = (int(n.replace(",", "")) for n in counts.groups())

    records = _records_between(config, start, end)
    sent_spans = [s for _, value in records[span_topic] for s in _spans(json.loads(value))]
    assert (len(records[span_topic]), len(sent_spans)) == (span_messages, spans) and spans > 0
    assert min(int(s["startTimeUnixNano"]) for s in sent_spans) >= started

    metrics = [(json.loads(key), json.loads(value)) for key, value in records[metrics_topic]]
    assert len(metrics) == metrics_messages > 0
    assert_valid("stormwatch_instance_metrics", [value for _, value in metrics])
    assert all(key == {"service_name": v["service_name"], "service_instance_id": v["service_instance_id"]}
               for key, v in metrics)
    server_spans = sum(s["kind"] == 2 for s in sent_spans)
    assert sum(v["requests"] for _, v in metrics) == server_spans
