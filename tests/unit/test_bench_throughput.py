"""bench/throughput.py's arithmetic: Kafka offsets to spans read, the slowest of a job's sources, and
the steady-state window. No Kafka, no Flink, no timings."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from throughput import SEED, TRACE_RATE, Input, messages_read, request_chunks, steady  # noqa: E402

from stormwatch.traffic.generator import TraceGenerator  # noqa: E402
from stormwatch.traffic.otlp import to_export_requests  # noqa: E402

TOPIC = "bench_source_ab12"


def test_offsets_count_the_spans_of_the_messages_read_in_each_partition():
    # Message i goes to partition i % 2: partition 0 holds 256, 100, 10 spans; partition 1 256, 50.
    data = Input.of(TOPIC, [1] * 5, [256, 256, 100, 50, 10])
    assert data.spans == 672
    assert data.per_partition() == {0: 3, 1: 2}
    assert data.spans_read({0: 0, 1: 0}) == 0
    assert data.spans_read({0: 2, 1: 1}) == 356 + 256
    assert data.spans_read({0: 3, 1: 2}) == 672
    # Before a first fetch a reader reports -1 + 1 = 0; past the end is the end.
    assert data.spans_read({0: -1, 1: 99}) == 306


def test_the_rate_is_measured_between_the_first_and_last_sample_of_the_window():
    samples = [(0.0, 0), (1.0, 10), (2.0, 30), (3.0, 50), (4.0, 70), (5.0, 90), (6.0, 100)]
    window = steady(samples, 100)
    assert (window.start_s, window.end_s, window.start_spans, window.end_spans) == (2.0, 4.0, 30, 70)
    assert window.samples == 3
    assert window.rate == 20.0


def test_no_rate_from_fewer_than_two_samples_in_the_window():
    assert steady([(0.0, 0), (1.0, 50), (2.0, 100)], 100) is None
    assert steady([], 100) is None


class FakeCluster:
    """Flink's REST answers for a job of two sources of TOPIC (flatten_spans: the spans and the raw
    reader) and a sink vertex."""

    def __init__(self, offsets: dict[str, dict[int, int]]):
        self.offsets = offsets  # reader -> partition -> currentOffset

    def job(self, job_id):
        return {"vertices": [{"id": reader, "name": f"Source: {reader}"} for reader in self.offsets]
                + [{"id": "sink", "name": "Calc -> Writer"}]}

    def metrics(self, job_id, names=None, vertex_id=None):
        ids = {f"Source__{vertex_id}[1].KafkaSourceReader.topic.{TOPIC}.partition.{p}.currentOffset": offset
               for p, offset in self.offsets.get(vertex_id, {}).items()}
        ids["Source__x[1].numRecordsOut"] = 7
        if names is None:
            return [{"id": i} for i in ids]
        return [{"id": n, "min": ids[n], "max": ids[n], "sum": ids[n], "avg": ids[n]} for n in names]


def test_a_job_has_read_what_its_slowest_source_has_read_per_partition():
    cluster = FakeCluster({"spans": {0: 9, 1: 3}, "raw": {0: 5, 1: 7}})
    # currentOffset is the last offset fetched: offset 5 means 6 messages read.
    assert messages_read(cluster, "job", TOPIC) == {0: 6, 1: 4}


def test_nothing_is_read_until_every_source_reports_every_partition():
    assert messages_read(FakeCluster({"spans": {0: 9, 1: 3}, "raw": {0: 5}}), "job", TOPIC) is None
    assert messages_read(FakeCluster({"spans": {0: 9, 1: 3}, "raw": {}}), "job", TOPIC) is None
    assert messages_read(FakeCluster({"spans": {0: 9, 1: 3}}), "job", "another_topic") is None



def test_the_streamed_input_is_the_same_messages_as_one_sort_of_every_span():
    chunks = list(request_chunks(5000, chunk_spans=600))
    assert len(chunks) > 3, "streamed in several chunks"
    spans = []
    for trace in TraceGenerator(seed=SEED).generate(TRACE_RATE):
        spans.extend(trace)
        if len(spans) >= 5000:
            break
    spans.sort(key=lambda s: s.end_unix_nano)
    assert [r for chunk in chunks for r in chunk] == to_export_requests(spans, 256)
