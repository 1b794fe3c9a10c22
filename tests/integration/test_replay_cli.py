"""`stormwatch replay` and `stormwatch generate` through the real local broker, as a user runs them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from kafka import TopicPartition

from connectors.kafka import consumer
from connectors.trace_formats import read_requests
from stormwatch import catalog
from stormwatch.config import PROJECT_ROOT
from tests.conftest import TEST_CONFIG, read_topic, stormwatch
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
    counts = re.search(r"delivered ([\d,]+) spans in ([\d,]+) message\(s\) and ([\d,]+) metrics message\(s\)", result.stdout)
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


# --- No silent loss: every message replayed is acknowledged, or the replay fails saying how many were not.

T0_NS = 1_700_000_000 * S


def _numbered_file(path, n: int, pad: int, step_ns: int = 50_000_000):
    """`n` OTLP JSON lines of one span each, named by their number, ending `step_ns` apart."""
    with path.open("w") as f:
        for i in range(n):
            span = {"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": f"seq-{i}", "kind": 2,
                    "startTimeUnixNano": str(T0_NS + i * step_ns), "endTimeUnixNano": str(T0_NS + i * step_ns + 1000),
                    "attributes": [{"key": "pad", "value": {"stringValue": "x" * pad}}]}
            f.write(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]}) + "\n")
    return path


def _numbers_by_partition(config, topic: str) -> dict[int, list[int]]:
    client = consumer(config, topic, consumer_timeout_ms=5000)
    out: dict[int, list[int]] = {}
    try:
        for m in client:
            out.setdefault(m.partition, []).extend(int(s["name"][4:]) for s in _spans(json.loads(m.value)))
    finally:
        client.close()
    return out


def _replay(config_path, *args: str, pinned: str | None = None) -> subprocess.Popen:
    command = [sys.executable, "-m", "stormwatch.cli", "--config", str(config_path), "replay", "--as-exported", *args]
    return subprocess.Popen((["taskset", "-c", pinned] if pinned else []) + command, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)


def _config_with(tmp_path, **properties: str):
    """The test configuration with producer settings of kafka-python (Java names) in [kafka.properties]."""
    path = tmp_path / "producer.toml"
    path.write_text(f"base = {json.dumps(str(TEST_CONFIG))}\n[kafka.properties]\n"
                    + "".join(f"{json.dumps(k)} = {json.dumps(v)}\n" for k, v in properties.items()))
    return path


def _replay_across_a_broker_stop(config, kafka, config_path, topic: str, file) -> tuple[subprocess.Popen, str, str]:
    """Replay `file` at its original pace (15 s), and stop the broker for 10 s once the first messages landed."""
    proc = _replay(config_path, str(file), "--topic", topic, "--pace", "original")
    try:
        while sum(_end_offsets(config, [topic]).values()) == 0:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert proc.poll() is None, "the replay ended before the broker stopped"
        kafka.stop()
        time.sleep(10)
    finally:
        kafka.start()
    out, err = proc.communicate(timeout=600)
    return proc, out, err


def test_a_replay_across_a_broker_stopped_for_10_s_delivers_every_message_in_order(config, kafka, topics_for, tmp_path):
    topic = topics_for(("source",))["source"]
    file = _numbered_file(tmp_path / "numbered.jsonl", 300, 20_000)
    proc, out, err = _replay_across_a_broker_stop(config, kafka, TEST_CONFIG, topic, file)
    assert proc.returncode == 0, err[-3000:]
    assert "300 delivered, 0 failed" in out
    held = _numbers_by_partition(config, topic)
    assert sorted(n for numbers in held.values() for n in numbers) == list(range(300))  # each once
    assert all(numbers == sorted(numbers) for numbers in held.values())


def test_a_replay_whose_messages_expire_while_the_broker_is_stopped_exits_non_zero_saying_how_many(
        config, kafka, topics_for, tmp_path):
    topic = topics_for(("source",))["source"]
    file = _numbered_file(tmp_path / "numbered.jsonl", 300, 20_000)
    tight = _config_with(tmp_path, **{"delivery.timeout.ms": "3000", "request.timeout.ms": "2000"})
    proc, out, err = _replay_across_a_broker_stop(config, kafka, tight, topic, file)
    assert proc.returncode != 0 and "delivered, 0 failed" not in out
    counts = re.search(r"([\d,]+) of 300 record\(s\) not delivered to Kafka \(([\d,]+) delivered, [\d,]+ failed", err)
    assert counts, err[-3000:]
    missing, delivered = (int(n.replace(",", "")) for n in counts.groups())
    assert missing == 300 - delivered > 0 and "KafkaTimeoutError" in err and "Traceback" not in err
    held = _numbers_by_partition(config, topic)
    # Every acknowledged message is there (one whose request expired under way may be there too), in order.
    assert delivered <= sum(map(len, held.values())) < 300
    assert all(numbers == sorted(numbers) for numbers in held.values())


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2, reason="needs taskset, 2 cores")
def test_a_replay_pinned_to_a_busy_core_delivers_every_message(config, kafka, topics_for, tmp_path):
    # 30 MB as fast as possible through a producer that shares its core with a busy loop. A short
    # delivery timeout (and max.request.size) make records expire if the producer buffered what the
    # starved client cannot send in time, rather than waiting for acknowledgements.
    topic = topics_for(("source",))["source"]
    file = _numbered_file(tmp_path / "numbered.jsonl", 300, 100_000)
    tight = _config_with(tmp_path, **{"delivery.timeout.ms": "5000", "request.timeout.ms": "4000",
                                      "max.request.size": "262144"})
    busy = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
    try:
        proc = _replay(tight, str(file), "--topic", topic, pinned="0")
        out, err = proc.communicate(timeout=600)
    finally:
        busy.kill()
        busy.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "300 delivered, 0 failed" in out
    held = _numbers_by_partition(config, topic)
    assert sorted(n for numbers in held.values() for n in numbers) == list(range(300))
    assert all(numbers == sorted(numbers) for numbers in held.values())
