import uuid

from stormwatch.runtime import kafka_broker


def test_a_cluster_id_never_starts_with_a_dash_which_kafka_storage_takes_for_an_option(monkeypatch):
    # 0xfb... encodes to "-" first in URL-safe base64: the id CI once drew.
    drawn = iter([uuid.UUID("fb000000-0000-0000-0000-000000000000"), uuid.UUID(int=1)])
    monkeypatch.setattr(kafka_broker.uuid, "uuid4", lambda: next(drawn))
    cluster_id = kafka_broker.new_cluster_id()
    assert not cluster_id.startswith("-")
    assert len(cluster_id) == 22


def test_cluster_ids_are_random():
    assert len({kafka_broker.new_cluster_id() for _ in range(100)}) == 100
