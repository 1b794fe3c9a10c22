"""The accounting of what the project produces (stormwatch.replay.deliver), with a stand-in for
KafkaProducer: its futures are kafka-python's own, resolved by a sender thread of the stand-in."""

from __future__ import annotations

import queue
import threading

import pytest
from kafka.errors import KafkaTimeoutError, NotLeaderForPartitionError
from kafka.future import Future

from stormwatch.replay import DeliveryError, deliver


class Producer:
    """Acknowledges the records it is sent one at a time, in order, from a thread of its own, except
    those `fails` gives an error for; `send` itself raises the error `raises` gives (as KafkaProducer
    does without metadata); from the record `stalls_at` on, it answers nothing more (as kafka-python
    3.0.12 can). Notes the most bytes ever unacknowledged when a record arrives."""

    def __init__(self, fails=lambda i: None, raises=lambda i: None, stalls_at: int | None = None) -> None:
        self.fails, self.raises, self.stalls_at = fails, raises, stalls_at
        self.config = {"max_request_size": 1000, "max_in_flight_requests_per_connection": 2,
                       "delivery_timeout_ms": 200, "request_timeout_ms": 100}
        self.sent: list[tuple[str, bytes | None, bytes, int | None]] = []
        self.acked: list[int] = []
        self.unacked_bytes = self.most_unacked_bytes = 0
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._sender, daemon=True).start()

    def send(self, topic, value, key=None, partition=None):
        index = len(self.sent)
        if (error := self.raises(index)) is not None:
            raise error
        self.sent.append((topic, key, value, partition))
        with self._lock:
            self.unacked_bytes += len(value)
            self.most_unacked_bytes = max(self.most_unacked_bytes, self.unacked_bytes)
        future = Future()
        self._queue.put((index, len(value), future))
        return future

    def _sender(self) -> None:
        while True:
            index, size, future = self._queue.get()
            if index == self.stalls_at:
                return
            threading.Event().wait(0.0005)  # a broker slower than the loop that sends to it
            with self._lock:
                self.unacked_bytes -= size
            error = self.fails(index)
            if error is None:
                self.acked.append(index)
                future.success(index)
            else:
                future.failure(error)
            self._queue.task_done()

    def flush(self, timeout=None) -> None:
        done = threading.Thread(target=self._queue.join, daemon=True)
        done.start()
        done.join(timeout)
        if done.is_alive():
            raise KafkaTimeoutError("flush")


def records(n: int, size: int = 100):
    return [("t", None, bytes([i % 256]) * size) for i in range(n)]


def test_every_record_acknowledged_is_counted_once_by_index():
    client, seen = Producer(), []
    assert deliver(client, records(50), partition=1, on_acked=seen.append) == 50
    assert sorted(seen) == list(range(50))
    assert [(t, k, v, p) for t, k, v, p in client.sent] == [(t, k, v, 1) for t, k, v in records(50)]


def test_failed_sends_raise_with_how_many_were_not_delivered_and_why():
    client = Producer(fails=lambda i: KafkaTimeoutError("batch expired") if i >= 20 else None)
    with pytest.raises(DeliveryError) as raised:
        deliver(client, records(100), total=100)
    e = raised.value
    # What the broker acknowledged and nothing else is delivered; every record sent and not
    # acknowledged failed; nothing is sent after a failure came back.
    assert e.delivered == len(client.acked) == 20
    assert e.failures == {"KafkaTimeoutError": len(client.sent) - 20}
    assert len(client.sent) < 100
    assert str(e).startswith(f"80 of 100 record(s) not delivered to Kafka (20 delivered, {len(client.sent) - 20} failed, "
                             f"{100 - len(client.sent)} not sent after the first failure)")
    assert "KafkaTimeoutError: batch expired" in str(e)


def test_a_send_that_raises_counts_as_failed_and_stops_the_rest():
    client = Producer(raises=lambda i: KafkaTimeoutError("no metadata") if i == 7 else None)
    with pytest.raises(DeliveryError) as raised:
        deliver(client, iter(records(30)))
    assert (raised.value.delivered, raised.value.failures) == (7, {"KafkaTimeoutError": 1})
    assert len(client.sent) == 7
    assert str(raised.value).startswith("1 record(s) not delivered to Kafka, and none sent after the first (7 delivered)")


def test_failures_are_named_by_error():
    errors = {3: NotLeaderForPartitionError("leader moved"), 4: KafkaTimeoutError("expired")}
    client = Producer(fails=lambda i: errors.get(i) or (KafkaTimeoutError("expired") if i > 4 else None))
    with pytest.raises(DeliveryError) as raised:
        deliver(client, records(10, size=10_000), in_flight_bytes=30_000)
    assert raised.value.failures["NotLeaderForPartitionError"] == 1
    assert "NotLeaderForPartitionError: " in str(raised.value)


def test_a_producer_faster_than_the_broker_waits_with_no_more_than_the_bound_in_flight():
    client = Producer()
    assert deliver(client, records(200, size=100), in_flight_bytes=1000) == 200
    assert client.most_unacked_bytes <= 1000
    # By default, what the client may have on the wire to a broker at once.
    client = Producer()
    assert deliver(client, records(200, size=500)) == 200
    assert client.most_unacked_bytes <= 2000


def test_a_record_larger_than_the_bound_is_still_sent_alone():
    client = Producer()
    assert deliver(client, records(5, size=5000), in_flight_bytes=1000) == 5
    assert client.most_unacked_bytes == 5000


def test_a_client_that_stalls_ends_the_delivery_with_its_unanswered_records_not_delivered():
    client = Producer(stalls_at=10)
    with pytest.raises(DeliveryError) as raised:
        deliver(client, records(100, size=100), total=100)
    e = raised.value
    assert e.delivered == len(client.acked) == 10
    assert e.failures == {"Unanswered": len(client.sent) - 10}
    assert str(e).startswith("90 of 100 record(s) not delivered")
