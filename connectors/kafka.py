"""Kafka clients and Flink Kafka table options, all built from one configuration.

Settings in [kafka.properties] use the Java client's names. Flink gets them unchanged (prefixed with
`properties.`; Kafka's JAAS login modules where the SQL connector relocated them); kafka-python gets
the same settings under its own names: dots turned into underscores, and PEM stores and PLAIN/SCRAM
JAAS credentials as kafka-python takes them. A setting kafka-python has no equivalent for is an
error for the Python clients, never silently dropped.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Protocol

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

log = logging.getLogger(__name__)


class KafkaConfig(Protocol):
    """What the Kafka clients read of a configuration (stormwatch.config.Config is one). connectors/ is
    how bytes enter and leave and imports nothing of stormwatch/, which builds on it."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def kafka_properties(self) -> dict[str, str]: ...

    @property
    def topics(self) -> Mapping[str, dict]: ...

# Every reader, Flink's and ours, reads only committed records: the jobs' exactly-once sinks write in
# transactions, and what a failed attempt wrote before its restart is aborted, never to be read.
READ_ISOLATION = "read_committed"


class KafkaSettingError(ValueError):
    pass


# The Java clients take SASL PLAIN and SCRAM credentials as one JAAS line; kafka-python as two settings.
_JAAS = re.compile(r"^\s*(?:org\.apache\.flink\.kafka\.shaded\.)?"
                   r"org\.apache\.kafka\.common\.security\.(?:plain\.PlainLoginModule|scram\.ScramLoginModule)"
                   r"\s+required\b(.*);\s*$", re.S)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas_credentials(jaas: str) -> dict[str, str] | None:
    match = _JAAS.match(jaas)
    # Quoted values as JAAS reads them: a backslash escapes the next character.
    options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(match.group(1))} if match else {}
    if "username" not in options or "password" not in options:
        return None
    return {"sasl_plain_username": options["username"], "sasl_plain_password": options["password"]}


def _translated(key: str, value: str, properties: dict[str, str]) -> dict | None:
    """kafka-python's settings for a Java client setting it names differently, or None if it has none."""
    def pem(store: str) -> bool:
        return properties.get(f"ssl.{store}.type", "").upper() == "PEM"

    if key == "sasl.jaas.config":
        return _jaas_credentials(value)
    if key == "ssl.truststore.location" and pem("truststore"):
        return {"ssl_cafile": value}
    if key == "ssl.keystore.location" and pem("keystore"):  # certificate and key in one file
        return {"ssl_certfile": value}
    if key in ("ssl.truststore.type", "ssl.keystore.type") and value.upper() == "PEM":
        return {}
    if key == "ssl.key.password":
        return {"ssl_password": value}
    if key == "ssl.endpoint.identification.algorithm":
        return {"ssl_check_hostname": value.lower() == "https"}
    return None


def _typed(default, value: str):
    """A setting's value (a string, as the Java clients take it) as the type of kafka-python's default."""
    if isinstance(default, bool):
        return value.strip().lower() == "true"
    if isinstance(default, (int, float)):
        try:
            number = float(value)
        except ValueError:
            return value  # a name where the default is a number: acks = "all"
        return number if isinstance(default, float) or not number.is_integer() else int(number)
    return value


def python_client_settings(config: KafkaConfig, client_class) -> dict:
    settings = {"bootstrap_servers": config.bootstrap_servers.split(",")}
    unsupported = []
    for key, value in config.kafka_properties.items():
        name = key.replace(".", "_")
        if name in client_class.DEFAULT_CONFIG:
            settings[name] = _typed(client_class.DEFAULT_CONFIG[name], value)
        elif (translated := _translated(key, value, config.kafka_properties)) is not None:
            settings.update(translated)
        elif any(name in other.DEFAULT_CONFIG for other in (KafkaAdminClient, KafkaConsumer, KafkaProducer)):
            continue  # another client's setting (delivery.timeout.ms is the producer's): as a Java client, this one leaves it
        else:
            unsupported.append(key)
    if unsupported:
        raise KafkaSettingError(
            f"kafka-python ({client_class.__name__}) has no equivalent of {', '.join(sorted(unsupported))}; "
            "Flink jobs accept them, but the Python tools cannot connect with these settings"
        )
    return settings


def admin(config: KafkaConfig, **overrides) -> KafkaAdminClient:
    """An admin client; `with admin(config) as client:` closes it (as every kafka-python client)."""
    return KafkaAdminClient(**{**python_client_settings(config, KafkaAdminClient), **overrides})


def producer(config: KafkaConfig, **overrides) -> KafkaProducer:
    # Idempotence (with acks=all): a batch the client retries after a lost response or a broker's
    # restart is written once and in its order; kafka-python retries until delivery_timeout_ms.
    defaults = {"acks": "all", "enable_idempotence": True, "linger_ms": 5}
    return KafkaProducer(**{**defaults, **python_client_settings(config, KafkaProducer), **overrides})


def consumer(config: KafkaConfig, *topics: str, **overrides) -> KafkaConsumer:
    defaults = {"auto_offset_reset": "earliest", "enable_auto_commit": False, "isolation_level": READ_ISOLATION}
    return KafkaConsumer(*topics, **{**defaults, **python_client_settings(config, KafkaConsumer), **overrides})


def committed_records(config: KafkaConfig, topic: str, quiet_s: float = 30.0) -> int:
    """How many committed records `topic` holds now: read (read_committed) up to its end offsets and
    counted. End offsets alone over-count a topic written in transactions (every commit or abort marker
    takes an offset, as do aborted records); for a topic written by a plain producer they are equal.
    KafkaError if a partition's position stops short of its end for `quiet_s`."""
    client = consumer(config)
    try:
        partitions = [TopicPartition(topic, p) for p in client.partitions_for_topic(topic) or ()]
        if not partitions:
            raise KafkaError(f"no topic {topic} on {config.bootstrap_servers}")
        client.assign(partitions)
        client.seek_to_beginning(*partitions)
        end = client.end_offsets(partitions)
        count, deadline = 0, time.monotonic() + quiet_s
        pending = {tp for tp in partitions if client.position(tp) < end[tp]}
        while pending:
            batches = client.poll(timeout_ms=1000)
            for tp, records in batches.items():
                count += sum(1 for r in records if r.offset < end[tp])
            if batches:
                deadline = time.monotonic() + quiet_s
            elif time.monotonic() > deadline:
                raise KafkaError(f"{topic}: no records for {quiet_s:g} s before the end offsets {end}")
            pending = {tp for tp in pending if client.position(tp) < end[tp]}
        return count
    finally:
        client.close()


def partition_count(config: KafkaConfig, topic: str) -> int:
    """How many partitions `topic` has on the broker; 0 if it does not exist (or the broker does not answer)."""
    try:
        client = consumer(config)
    except KafkaError:
        return 0
    try:
        return len(client.partitions_for_topic(topic) or ())
    finally:
        client.close()


def broker_ready(config: KafkaConfig) -> bool:
    try:
        with admin(config, request_timeout_ms=2000, bootstrap_timeout_ms=2000) as client:
            client.list_topics()
        return True
    except KafkaError:
        return False


def require_topics(config: KafkaConfig, topics: set[str]) -> None:
    """ValueError naming the topics that do not exist: a producer would only time out on them."""
    with admin(config) as client:
        missing = sorted(topics - set(client.list_topics()))
    if missing:
        raise ValueError(f"no topic {', '.join(missing)} on {config.bootstrap_servers}: create the project's "
                         f"topics with `stormwatch topics create`, or name an existing one")


def create_topics(config: KafkaConfig, specs: dict[str, dict] | None = None) -> list[str]:
    """Create the topics in `specs` (default: the configured ones) that do not exist yet.

    A spec is {"partitions": N, "replication_factor": R, "config": {...}}; returns a line per topic.
    """
    wanted = config.topics if specs is None else specs
    with admin(config) as client:
        existing = set(client.list_topics())
        lines, new = [], []
        for name, spec in wanted.items():
            if name in existing:
                lines.append(f"{name}: exists")
                continue
            new.append(
                NewTopic(
                    name=name,
                    num_partitions=int(spec["partitions"]),
                    replication_factor=int(spec.get("replication_factor", 1)),
                    topic_configs={str(k): str(v) for k, v in spec.get("config", {}).items()},
                )
            )
            lines.append(f"{name}: created, {spec['partitions']} partition(s)")
        if new:
            try:
                client.create_topics(new)
            except TopicAlreadyExistsError:
                pass  # created concurrently by another caller; what we wanted exists
            _await_listing(client, {t.name for t in new}, listed=True)
        return lines


def delete_topics(config: KafkaConfig, names: set[str]) -> None:
    """Delete those of `names` that exist, and return once the broker no longer lists them."""
    with admin(config) as client:
        existing = names & set(client.list_topics())
        if existing:
            client.delete_topics(sorted(existing))
            _await_listing(client, existing, listed=False)


def _await_listing(client: KafkaAdminClient, names: set[str], listed: bool, timeout_s: float = 30.0) -> None:
    # The controller acknowledges a change before every broker's metadata shows it: wait, so the next
    # client (a producer, require_topics) sees what was just created or deleted.
    deadline = time.monotonic() + timeout_s
    while True:
        shown = names & set(client.list_topics())
        if shown == (names if listed else set()):
            return
        if time.monotonic() > deadline:
            raise KafkaError(f"topics {sorted(names)} still {'not ' if listed else ''}listed after {timeout_s:g} s")
        time.sleep(0.1)


def flink_options(config: KafkaConfig, topic: str, **extra: str) -> dict[str, str]:
    """The options of a Flink Kafka table on `topic`: connector, brokers, pass-through properties. The
    span path's DataStream source (io.stormwatch.flink.traces.SpanSource) takes the same."""
    return {
        "connector": "kafka",
        "topic": topic,
        "properties.bootstrap.servers": config.bootstrap_servers,
        "properties.isolation.level": READ_ISOLATION,
        **{f"properties.{k}": _for_flink(k, v) for k, v in config.kafka_properties.items()},
        **extra,
    }


def table_options(config: KafkaConfig, topic: str, **extra: str) -> str:
    """The WITH (...) body of a Flink Kafka table on `topic` (flink_options)."""
    return sql_options(flink_options(config, topic, **extra), ",\n  ")


def _for_flink(key: str, value: str) -> str:
    """flink-sql-connector-kafka carries the Kafka client relocated under org.apache.flink.kafka.shaded:
    a JAAS line must name Kafka's login modules there (Flink's Kafka connector docs, Security), or every
    client of the job fails to log in. Other modules, and names already relocated, stay as they are."""
    if key != "sasl.jaas.config":
        return value
    return re.sub(r"(?<![\w.])org\.apache\.kafka\.", "org.apache.flink.kafka.shaded.org.apache.kafka.", value)


def sql_options(options: dict[str, object], separator: str = ", ") -> str:
    """'key' = 'value' pairs as a WITH (...) clause or an OPTIONS hint holds them, quotes escaped."""
    return separator.join(f"'{_sql_escape(k)}' = '{_sql_escape(str(v))}'" for k, v in options.items())


def _sql_escape(text: str) -> str:
    return text.replace("'", "''")
