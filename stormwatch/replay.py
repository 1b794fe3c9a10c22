"""Replaying OTLP JSON lines files (one ExportTraceServiceRequest a line) into a Kafka topic.

Files exported after the fact, like ../shared/data/trainticket, group a pod's spans into messages
that each cover up to a minute; a live Collector's batch processor sends what ended in the last
moments. `collector_batches` re-batches a file that way, so event-time windows downstream see the
out-of-orderness of real traffic rather than that of the export.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from connectors.kafka import producer
from stormwatch.config import Config


def otlp_json_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        for line in f:
            line = line.strip()
            if line:
                yield line


def collector_batches(messages: Iterable[bytes], batch_ms: int = 1000, max_spans: int = 256) -> Iterator[bytes]:
    """The spans of `messages` in end-time order, a message per resource and scope per `batch_ms` of
    end time (at most `max_spans` spans each). Span, resource and scope objects are kept as they are."""
    ended = []
    for message in messages:
        for rs in json.loads(message).get("resourceSpans", []):
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


def _requests(batch: dict[tuple[str, str], list[dict]], max_spans: int) -> Iterator[bytes]:
    for (resource, scope), spans in batch.items():
        for i in range(0, len(spans), max_spans):
            request = {"resourceSpans": [{"resource": json.loads(resource),
                                          "scopeSpans": [{"scope": json.loads(scope), "spans": spans[i:i + max_spans]}]}]}
            yield json.dumps(request, separators=(",", ":")).encode()


def produce(config: Config, topic: str, messages: Iterable[bytes], partition: int | None = None) -> int:
    """Send every message (to one partition if given: a bounded replay that must keep its order),
    wait until the broker acknowledged all of them; returns the count."""
    client = producer(config)
    count = 0
    try:
        for message in messages:
            client.send(topic, message, partition=partition)
            count += 1
        client.flush()
    finally:
        client.close()
    return count


def replay_files(config: Config, paths: Iterable[Path], topic: str, batch_ms: int | None = 1000) -> int:
    """Produce the files' messages; re-batched as a Collector would unless `batch_ms` is None."""
    messages = (m for p in paths for m in otlp_json_lines(p))
    return produce(config, topic, messages if batch_ms is None else collector_batches(messages, batch_ms))
