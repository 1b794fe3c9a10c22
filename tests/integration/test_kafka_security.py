"""Kafka security settings pass unchanged to every client: a broker of its own that takes only
SASL/PLAIN and enforces ACLs, reached by the Python tools (admin, producer, consumer: credentials
translated from the JAAS line) and by a Flink job (the properties as they are), no password in any
output or log; and only a principal with WRITE on the policy topic can publish a policy."""

from __future__ import annotations

import json
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourceType
from kafka.errors import TopicAuthorizationFailedError

from connectors.kafka import admin, broker_ready, consumer, create_topics, producer
from reference.otlp import SHARED_DATA, otlp_json_lines, spans_of_file
from stormwatch.config import load
from stormwatch.policy_signing import SigningKey, signature_error
from stormwatch.replay import produce
from stormwatch.runtime.flink_cluster import flink_home
from stormwatch.runtime.kafka_broker import KafkaBroker
from tests.conftest import TEST_CONFIG, read_topic, stormwatch

pytestmark = pytest.mark.integration

TRACES = SHARED_DATA / "2023-01-29_0850_fault_free.otlp.jsonl"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USERS = ("stormwatch", "operator", "intruder")
# The broker authorizes every request: the stormwatch user (the jobs and tools) and the controller
# listener's principal (PLAINTEXT here: ANONYMOUS; a production controller listener authenticates too)
# may do anything, everyone else only what an ACL allows, and nothing where no ACL is found.
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:stormwatch;User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
}


def _config(folder: Path, port: int, controller: int, passwords: dict[str, str], user: str | None,
            key_file: Path | None = None) -> Path:
    login = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    path = folder / f"{user or 'anonymous'}.toml"
    client = f'{login} username="{user}" password="{passwords[user]}";' if user else ""
    accounts = " ".join(f'user_{name}="{password}"' for name, password in passwords.items())
    authorizer = "".join(f'"{k}" = "{v}"\n' for k, v in AUTHORIZER.items())
    path.write_text(f"""base = {str(TEST_CONFIG)!r}
runtime_dir = {str(folder / "runtime")!r}

[kafka]
bootstrap_servers = "127.0.0.1:{port}"

[kafka.properties]
{f'''"security.protocol" = "SASL_PLAINTEXT"
"sasl.mechanism" = "PLAIN"
"sasl.jaas.config" = '{client}'
''' if user else ""}
[kafka.local]
port = {port}
controller_port = {controller}

[kafka.local.server_properties]
listeners = "SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
"advertised.listeners" = "SASL_PLAINTEXT://127.0.0.1:{port}"
"listener.security.protocol.map" = "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
"inter.broker.listener.name" = "SASL_PLAINTEXT"
"sasl.enabled.mechanisms" = "PLAIN"
"sasl.mechanism.inter.broker.protocol" = "PLAIN"
"listener.name.sasl_plaintext.plain.sasl.jaas.config" = '{login} username="stormwatch" password="{passwords["stormwatch"]}" {accounts};'
{authorizer}
[pipeline.policy]
signing_key_file = {str(key_file or "")!r}
""")
    return path


@dataclass(frozen=True)
class SaslBroker:
    folder: Path
    passwords: dict[str, str]
    configs: dict[str | None, Path]  # per user (None: no credentials), each a configuration file
    key: str  # the policy signing key, in configs[user]'s signing_key_file

    def config(self, user: str | None = "stormwatch"):
        return load(self.configs[user])


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """One broker for the file: SASL/PLAIN only, ACLs enforced, three users."""
    folder = tmp_path_factory.mktemp("sasl")
    passwords = {user: f"pw-{user}-{uuid.uuid4().hex}" for user in USERS}
    key = uuid.uuid4().hex + uuid.uuid4().hex
    (folder / "policy.key").write_text(key + "\n")
    port, controller = _free_port(), _free_port()
    configs = {user: _config(folder, port, controller, passwords, user, folder / "policy.key")
               for user in (*USERS, None)}
    broker = KafkaBroker(load(configs["stormwatch"]))
    broker.start()
    try:
        yield SaslBroker(folder, passwords, configs, key)
    finally:
        broker.stop()


def test_a_sasl_broker_serves_the_tools_and_jobs_and_no_credential_is_logged(sasl_broker):
    sasl = sasl_broker.configs["stormwatch"]
    config = load(sasl)
    job_log = flink_home() / "log"
    logged_before = {f: f.stat().st_size for f in job_log.glob("*.log")}
    assert not broker_ready(sasl_broker.config(None))
    names = {role: f"sasl_{role}" for role in ("source", "sink", "dead_letters")}
    create_topics(config, {name: {"partitions": 2} for name in names.values()})
    produce(config, names["source"], list(otlp_json_lines(TRACES)))

    result = stormwatch("run", "flatten_spans", "--", "--bounded", "--group-id", "sasl",
                        *[f"--topic={role}={name}" for role, name in names.items()], config=sasl)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(read_topic(config, names["sink"], len(spans_of_file(TRACES)))) == len(spans_of_file(TRACES))

    secrets = [password.encode() for password in sasl_broker.passwords.values()]
    assert not any(s.decode() in result.stdout + result.stderr for s in secrets)
    for log in job_log.glob("*.log"):
        with log.open("rb") as f:
            f.seek(logged_before.get(log, 0))
            written = f.read()
            assert not any(s in written for s in secrets), log
    # The broker's own configuration holds the passwords; what it and the clients log does not.
    for path in (sasl_broker.folder / "runtime").rglob("*"):
        if path.is_file() and path.name != "server.properties":
            assert not any(s in path.read_bytes() for s in secrets), path


def _policy_records(config, topic: str) -> list[dict]:
    """Every record on the policy topic, read to its end as the decision jobs read it (from the start)."""
    client = consumer(config, topic, consumer_timeout_ms=3000)
    try:
        return [{"key": m.key.decode(), **json.loads(m.value)} for m in client]
    finally:
        client.close()


def test_only_a_principal_with_write_on_the_policy_topic_can_publish_a_policy(sasl_broker):
    """Who may change the policy: the broker refuses a policy record from a principal without WRITE on
    the topic (the intruder may read it), so the jobs never see it; the operator's, ACL'd to write
    it, arrives signed with the configured key."""
    admin_config = sasl_broker.config("stormwatch")
    topic = "stormwatch_policy"
    create_topics(admin_config, {topic: {"partitions": 1, "config": {"cleanup.policy": "compact"}}})
    allow = ACLPermissionType.ALLOW
    on_topic = ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)
    with admin(admin_config) as client:
        result = client.create_acls([ACL("User:operator", "*", ACLOperation.WRITE, allow, on_topic),
                                     ACL("User:intruder", "*", ACLOperation.READ, allow, on_topic)])
        assert not result["failed"], result["failed"]

    # The intruder's own producer (not idempotent: an idempotent one is refused a producer id before it
    # writes, ClusterAuthorizationFailedError, as the CLI's is below): the broker refuses the write.
    intruder = producer(sasl_broker.config("intruder"), enable_idempotence=False)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            intruder.send(topic, key=b"default", value=b'{"name": "default", "version": "9999"}').get(timeout=30)
    finally:
        intruder.close(timeout=5)
    # The CLI as the intruder: a clear error, nothing written.
    refused = stormwatch("policy", "publish", config=sasl_broker.configs["intruder"])
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert "refused this principal's policy record on stormwatch_policy" in refused.stderr
    assert "needs WRITE on the topic" in refused.stderr

    published = stormwatch("policy", "publish", config=sasl_broker.configs["operator"])
    assert published.returncode == 0, published.stderr[-2000:]
    assert "signed with the key from file" in published.stdout
    (record,) = _policy_records(admin_config, topic)
    key = SigningKey(sasl_broker.key.encode(), "test")
    assert record.pop("key") == "default" and record["version"] != "9999"
    assert signature_error(record, key) is None
    assert sasl_broker.key not in published.stdout + published.stderr + refused.stdout + refused.stderr
