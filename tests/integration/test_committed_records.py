"""connectors.kafka.committed_records, which benchmarks check their input with, on the real broker."""

from __future__ import annotations

import uuid

import pytest
from kafka import TopicPartition

from connectors.kafka import committed_records, consumer, producer

pytestmark = pytest.mark.integration


def _end_offsets_sum(config, topic: str) -> int:
    client = consumer(config)
    try:
        return sum(client.end_offsets([TopicPartition(topic, p) for p in client.partitions_for_topic(topic)]).values())
    finally:
        client.close()


def test_committed_records_of_a_transactional_topic_leave_out_aborted_records_and_markers(config, topics_for):
    topic = topics_for(("source",))["source"]
    client = producer(config, transactional_id=f"test-committed-{uuid.uuid4().hex[:8]}")
    try:
        client.init_transactions()
        for n, commit in ((5, True), (3, False), (2, True)):
            client.begin_transaction()
            for i in range(n):
                client.send(topic, b"%d" % i, partition=i % 2)
            client.commit_transaction() if commit else client.abort_transaction()
    finally:
        client.close()
    assert committed_records(config, topic) == 7
    assert _end_offsets_sum(config, topic) > 7  # the aborted records and every marker take offsets


def test_committed_records_of_a_plain_topic_are_its_end_offsets(config, topics_for):
    topic = topics_for(("source",))["source"]
    assert committed_records(config, topic) == 0
    client = producer(config)
    try:
        for i in range(11):
            client.send(topic, b"%d" % i).get(timeout=30)
    finally:
        client.close()
    assert committed_records(config, topic) == 11 == _end_offsets_sum(config, topic)
