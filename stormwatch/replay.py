"""Replaying OTLP JSON lines files (one ExportTraceServiceRequest a line) into a Kafka topic."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from connectors.kafka import producer
from stormwatch.config import Config


def otlp_json_lines(path: Path) -> Iterable[bytes]:
    with path.open("rb") as f:
        for line in f:
            line = line.strip()
            if line:
                yield line


def produce(config: Config, topic: str, messages: Iterable[bytes]) -> int:
    """Send every message, wait until the broker acknowledged all of them; returns the count."""
    client = producer(config)
    count = 0
    try:
        for message in messages:
            client.send(topic, message)
            count += 1
        client.flush()
    finally:
        client.close()
    return count


def replay_files(config: Config, paths: Iterable[Path], topic: str) -> int:
    return produce(config, topic, (m for p in paths for m in otlp_json_lines(p)))
