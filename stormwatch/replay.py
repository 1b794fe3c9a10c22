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
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from connectors.kafka import producer, require_topics
from stormwatch.config import Config
from stormwatch.otlp_encoding import encoder
from stormwatch.trace_formats import read_requests
from stormwatch.traffic.otlp import encode

T = TypeVar("T")


def otlp_json_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        for line in f:
            line = line.strip()
            if line:
                yield line


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
    return (encode(r) for r in batch_requests((json.loads(m) for m in messages), batch_ms, max_spans))


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


def send(config: Config, records: Iterable[tuple[str, bytes | None, bytes]], topics: set[str],
         partition: int | None = None, on_sent: Callable[[int], None] | None = None) -> int:
    """Produce (topic, key, value) records to `topics` (to one partition if given: a bounded replay that
    must keep its order), wait until the broker acknowledged all of them; returns the count."""
    require_topics(config, topics)
    client = producer(config)
    count = 0
    try:
        for topic, key, value in records:
            client.send(topic, value, key=key, partition=partition)
            count += 1
            if on_sent:
                on_sent(count)
        client.flush()
    finally:
        client.close()
    return count


def produce(config: Config, topic: str, messages: Iterable[bytes], partition: int | None = None) -> int:
    """Send every message to `topic`; returns the count."""
    return send(config, ((topic, None, m) for m in messages), {topic}, partition)


@dataclass(frozen=True)
class ReplaySummary:
    messages: int
    spans: int
    event_span_s: float  # from the first span's end to the last's
    wall_s: float

    def line(self, topic: str, speed: float | None) -> str:
        pace = "as fast as possible" if speed is None else "at the original pace" if speed == 1 else f"at {speed:g}x"
        return (f"replayed {self.spans:,} spans in {self.messages:,} message(s) to {topic} {pace}: "
                f"{self.event_span_s:.1f} s of event time in {self.wall_s:.1f} s")


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
    sent_spans = 0

    def on_sent(count: int) -> None:
        nonlocal sent_spans
        sent_spans += spans[count - 1]
        bar.update(count, sent_spans, force=count == len(requests))

    items = paced(range(len(requests)), lambda i: ends[i], speed)
    try:
        count = send(config, ((topic, None, encode_request(requests[i])) for i in items), {topic}, on_sent=on_sent)
    finally:
        bar.close()
    event_span_s = (max(ends) - first_end(requests)) / 1e9 if sum(spans) else 0.0
    return ReplaySummary(count, sum(spans), event_span_s, time.monotonic() - started)
