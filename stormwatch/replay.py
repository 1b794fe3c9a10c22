"""Replaying trace files into a Kafka topic: OTLP JSON lines, Zipkin v2 JSON, Jaeger JSON.

Files exported after the fact, like ../shared/data/trainticket, group a pod's spans into messages
that each cover up to a minute; a live Collector's batch processor sends what ended in the last
moments. `collector_batches` re-batches a file that way, so event-time windows downstream see the
out-of-orderness of real traffic rather than that of the export.

Pace: as fast as possible, at the original pace (a message is sent when as much time has passed
since the first as between their spans' end times), or that pace times N. `rebase` moves every
timestamp so that the first span ends now, keeping the gaps.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from kafka.errors import KafkaError, KafkaTimeoutError

from connectors.kafka import producer, require_topics
from connectors.otlp import encode_json, encoder
from connectors.trace_formats import read_requests
from stormwatch.config import Config

T = TypeVar("T")
# (topic, key, value), or (topic, key, value, partition) for a record that names its partition (None: any)
Record = tuple[str, bytes | None, bytes] | tuple[str, bytes | None, bytes, int | None]


def _spans(request: dict) -> Iterator[dict]:
    for rs in request.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            yield from ss.get("spans", [])


def batch_requests(requests: Iterable[dict], batch_ms: int = 1000, max_spans: int = 256) -> Iterator[dict]:
    """The spans of `requests` in end-time order, a request per resource and scope per `batch_ms` of
    end time (at most `max_spans` spans each). Span, resource and scope objects are kept as they are."""
    ended = []
    for request in requests:
        for rs in request.get("resourceSpans", []):
            resource = json.dumps(rs.get("resource", {}), sort_keys=True)
            for ss in rs.get("scopeSpans", []):
                scope = json.dumps(ss.get("scope", {}), sort_keys=True)
                for span in ss.get("spans", []):
                    ended.append((int(span["endTimeUnixNano"]), resource, scope, span))
    ended.sort(key=lambda e: e[0])
    batch: dict[tuple[str, str], list[dict]] = {}
    batch_end = None
    for end, resource, scope, span in ended:
        if batch_end is not None and end >= batch_end:
            yield from _requests(batch, max_spans)
            batch = {}
        if not batch:
            batch_end = end + batch_ms * 1_000_000
        batch.setdefault((resource, scope), []).append(span)
    yield from _requests(batch, max_spans)


def _requests(batch: dict[tuple[str, str], list[dict]], max_spans: int) -> Iterator[dict]:
    for (resource, scope), spans in batch.items():
        for i in range(0, len(spans), max_spans):
            yield {"resourceSpans": [{"resource": json.loads(resource),
                                      "scopeSpans": [{"scope": json.loads(scope), "spans": spans[i:i + max_spans]}]}]}


def collector_batches(messages: Iterable[bytes], batch_ms: int = 1000, max_spans: int = 256) -> Iterator[bytes]:
    """`batch_requests` of encoded messages, encoded."""
    return (encode_json(r) for r in batch_requests((json.loads(m) for m in messages), batch_ms, max_spans))


def last_end(request: dict) -> int:
    """When a request's last span ended (ns): when a Collector would have sent it."""
    return max((int(s["endTimeUnixNano"]) for s in _spans(request)), default=0)


def rebase(request: dict, delta_ns: int) -> dict:
    """The request with every span's and event's time moved by `delta_ns` (changed in place)."""
    for span in _spans(request):
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            span[key] = str(int(span[key]) + delta_ns)
        for event in span.get("events", []):
            event["timeUnixNano"] = str(int(event["timeUnixNano"]) + delta_ns)
    return request


def first_end(requests: Iterable[dict]) -> int | None:
    """When the first span of all ended (ns); None without spans."""
    return min((int(s["endTimeUnixNano"]) for r in requests for s in _spans(r)), default=None)


def rebase_delta(requests: Iterable[dict], now_ns: int) -> int:
    """How far to move times so that the first span ends at `now_ns`."""
    first = first_end(requests)
    return 0 if first is None else now_ns - first


def parse_pace(text: str) -> float | None:
    """`--pace`: "fast" (None: no waiting), "original" (1.0) or a speed-up factor N > 0."""
    if text == "fast":
        return None
    if text == "original":
        return 1.0
    try:
        speed = float(text)
    except ValueError:
        speed = 0.0
    if not speed > 0:
        raise ValueError(f"--pace is fast, original or a positive factor, not {text!r}")
    return speed


def due_s(event_ns: int, first_event_ns: int, speed: float | None) -> float:
    """Seconds after the start of sending at which the message of `event_ns` is due."""
    if speed is None:
        return 0.0
    return max(0.0, (event_ns - first_event_ns) / 1e9 / speed)


def paced(items: Iterable[T], event_ns: Callable[[T], int], speed: float | None,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Iterator[T]:
    """The items, each once it is due (`due_s`) after the first; those due already come at once."""
    first = None
    started = clock()
    for item in items:
        event = event_ns(item)
        first = event if first is None else first
        wait = due_s(event, first, speed) - (clock() - started)
        if wait > 0:
            sleep(wait)
        yield item


class Progress:
    """A plain-text progress bar on a terminal, redrawn at most every `every_s` seconds."""

    def __init__(self, total: int | None, stream: IO[str] = sys.stderr, width: int = 30, every_s: float = 0.2,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.stream, self.width, self.every_s, self.clock = total, stream, width, every_s, clock
        self.enabled = stream.isatty()
        self._last = float("-inf")

    def update(self, messages: int, spans: int, force: bool = False) -> None:
        if not self.enabled or (not force and self.clock() - self._last < self.every_s):
            return
        self._last = self.clock()
        self.stream.write("\r" + render_progress(messages, spans, self.total, self.width))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def render_progress(messages: int, spans: int, total: int | None, width: int = 30) -> str:
    counts = f"{messages:,}{f'/{total:,}' if total else ''} messages, {spans:,} spans"
    if not total:
        return counts
    done = min(1.0, messages / total)
    filled = round(done * width)
    return f"[{'#' * filled}{'-' * (width - filled)}] {done:4.0%} {counts}"


class DeliveryError(RuntimeError):
    """Records the broker did not acknowledge: how many, and why (the first message of each error). A
    record that expired while its request was under way may have been written all the same."""

    def __init__(self, delivered: int, failures: Counter[str], reasons: dict[str, str], total: int | None) -> None:
        self.delivered, self.failures, self.total = delivered, failures, total
        failed = sum(failures.values())
        why = "; ".join(f"{n:,} {reasons[name]}" for name, n in failures.most_common())
        if total is None:
            head = f"{failed:,} record(s) not delivered to Kafka, and none sent after the first ({delivered:,} delivered)"
        else:
            head = (f"{total - delivered:,} of {total:,} record(s) not delivered to Kafka ({delivered:,} delivered, "
                    f"{failed:,} failed, {total - delivered - failed:,} not sent after the first failure)")
        super().__init__(f"{head}: {why or 'unacknowledged'}")


class Delivery:
    """The accounting of the records handed to a producer, kept by the futures' callbacks: acknowledged,
    failed (by error), and the bytes not yet acknowledged. kafka-python's buffer has no bound, and a record
    that waits in it longer than delivery_timeout_ms expires: `admit` makes a producer that outruns the
    broker wait until the unacknowledged bytes fit under `in_flight_bytes` instead."""

    def __init__(self, in_flight_bytes: int, on_acked: Callable[[int], None] | None = None) -> None:
        self.in_flight_bytes, self.on_acked = in_flight_bytes, on_acked
        self.sent = self.acked = self.unacked_bytes = 0
        self.failures: Counter[str] = Counter()
        self.reasons: dict[str, str] = {}  # an example message per error name
        self._changed = threading.Condition()

    def admit(self, size: int, stall_s: float | None = None) -> bool:
        """Wait until `size` more bytes may be in flight (one record always may); False once a record
        failed, or nothing was answered for `stall_s`: nothing more is sent, so what was delivered has
        no gap after which more came."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.failures or self.unacked_bytes == 0
                                          or self.unacked_bytes + size <= self.in_flight_bytes, stall_s):
                return False
            if self.failures:
                return False
            self.sent += 1
            self.unacked_bytes += size
            return True

    def ack(self, index: int, size: int, _metadata=None) -> None:
        with self._changed:
            self.acked += 1
            self.unacked_bytes -= size
            if self.on_acked:
                self.on_acked(index)
            self._changed.notify_all()

    def fail(self, size: int, error: Exception) -> None:
        with self._changed:
            name, text = type(error).__name__, str(error)
            self.failures[name] += 1
            self.reasons.setdefault(name, text if text.startswith(name) else f"{name}: {text}".rstrip(": "))
            self.unacked_bytes -= size
            self._changed.notify_all()

    def settle(self, total: int | None = None, stall_s: float | None = None, wait: bool = True) -> int:
        """Once every sent record was acknowledged or failed (those still unanswered after `stall_s`, or
        now if not `wait`, count as failed): the count delivered, or DeliveryError."""
        with self._changed:
            self._changed.wait_for(lambda: self.acked + sum(self.failures.values()) == self.sent,
                                   stall_s if wait else 0)
            if unanswered := self.sent - self.acked - sum(self.failures.values()):
                self.failures["Unanswered"] += unanswered
                self.reasons["Unanswered"] = f"Unanswered: the client stalled, no answer within {stall_s:g} s"
            if self.failures:
                raise DeliveryError(self.acked, self.failures, self.reasons, total)
            return self.acked


def deliver(client, records: Iterable[Record], partition: int | None = None,
            on_acked: Callable[[int], None] | None = None, total: int | None = None,
            in_flight_bytes: int | None = None) -> int:
    """Produce (topic, key, value) records, or (topic, key, value, partition) ones that name their own
    partition, with `client` (a KafkaProducer), `on_acked(i)` as the i-th is
    acknowledged; returns the count once all are, or raises DeliveryError naming how many were not
    (`total`: how many `records` holds, if known) and why. The client retries what is retriable, as its
    settings say (retries, delivery_timeout_ms, enable_idempotence). Unacknowledged bytes stay under
    `in_flight_bytes`, by default what the client may have on the wire to a broker at once.

    The client answers every record within delivery_timeout_ms; kafka-python 3.0.12 can stall instead
    (an idempotent producer whose batches expired while the broker was away): no answer for that plus
    request_timeout_ms counts what is unanswered as not delivered."""
    settings = client.config
    if in_flight_bytes is None:
        in_flight_bytes = settings["max_request_size"] * settings["max_in_flight_requests_per_connection"]
    stall_s = (settings["delivery_timeout_ms"] + settings["request_timeout_ms"]) / 1000
    delivery = Delivery(in_flight_bytes, on_acked)
    for index, (topic, key, value, *own) in enumerate(records):
        size = len(value) + len(key or b"")
        if not delivery.admit(size, stall_s):
            break
        try:
            future = client.send(topic, value, key=key, partition=own[0] if own and own[0] is not None else partition)
        except KafkaError as e:  # no metadata within max_block_ms, a record over max_request_size
            delivery.fail(size, e)
            break
        future.add_callback(delivery.ack, index, size).add_errback(delivery.fail, size)
    try:
        client.flush(timeout=stall_s)
    except KafkaTimeoutError:  # stalled: what is unanswered now stays so
        return delivery.settle(total, stall_s, wait=False)
    return delivery.settle(total, stall_s)


def send(config: Config, records: Iterable[Record], topics: set[str],
         partition: int | None = None, on_acked: Callable[[int], None] | None = None, total: int | None = None) -> int:
    """`deliver` the records to `topics` (to one partition if given: a bounded replay that must keep its
    order) with a producer of the configuration."""
    require_topics(config, topics)
    client = producer(config)
    try:
        count = deliver(client, records, partition, on_acked, total)
    except BaseException:
        try:
            client.close(timeout=0)  # what it still holds was counted as not delivered, or the error says enough
        except KafkaTimeoutError:  # a stalled client: its sender thread is a daemon, left behind
            client._closed = True  # or its __del__ would wait for it forever
        raise
    client.close()
    return count


def produce(config: Config, topic: str, messages: Iterable[bytes], partition: int | None = None) -> int:
    """Send every message to `topic`; returns the count delivered, or raises DeliveryError."""
    total = len(messages) if isinstance(messages, Sized) else None
    return send(config, ((topic, None, m) for m in messages), {topic}, partition, total=total)


@dataclass(frozen=True)
class ReplaySummary:
    messages: int  # all delivered: a failure raises DeliveryError instead
    spans: int
    event_span_s: float  # from the first span's end to the last's
    wall_s: float

    def line(self, topic: str, speed: float | None) -> str:
        pace = "as fast as possible" if speed is None else "at the original pace" if speed == 1 else f"at {speed:g}x"
        return (f"replayed {self.spans:,} spans in {self.messages:,} message(s) to {topic} {pace}: "
                f"{self.event_span_s:.1f} s of event time in {self.wall_s:.1f} s; "
                f"{self.messages:,} delivered, 0 failed")


def replay(config: Config, paths: Iterable[Path], topic: str, fmt: str = "auto", batch_ms: int | None = 1000,
           speed: float | None = None, rebase_now: bool = False) -> ReplaySummary:
    """Read, convert, re-batch (unless `batch_ms` is None), rebase to now if asked, and send at `speed`
    in the encoding flatten_spans reads ([pipeline.spans] encoding)."""
    requests = [r for p in paths for r in read_requests(Path(p), fmt)]
    encode_request = encoder(config.get("pipeline", "spans", "encoding"))
    if batch_ms is not None:
        requests = list(batch_requests(requests, batch_ms))
    if rebase_now:
        delta = rebase_delta(requests, time.time_ns())
        requests = [rebase(r, delta) for r in requests]
    ends = [last_end(r) for r in requests]
    spans = [sum(1 for _ in _spans(r)) for r in requests]
    bar = Progress(len(requests))
    started = time.monotonic()
    acked = acked_spans = 0

    def on_acked(index: int) -> None:
        nonlocal acked, acked_spans
        acked += 1
        acked_spans += spans[index]
        bar.update(acked, acked_spans, force=acked == len(requests))

    items = paced(range(len(requests)), lambda i: ends[i], speed)
    try:
        count = send(config, ((topic, None, encode_request(requests[i])) for i in items), {topic},
                     on_acked=on_acked, total=len(requests))
    finally:
        bar.close()
    event_span_s = (max(ends) - first_end(requests)) / 1e9 if sum(spans) else 0.0
    return ReplaySummary(count, sum(spans), event_span_s, time.monotonic() - started)
