"""Kafka security settings pass unchanged to every client: a broker of its own that takes only
SASL/PLAIN, reached by the Python tools (admin, producer, consumer: credentials translated from the
JAAS line) and by a Flink job (the properties as they are), and the password in no output or log."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest

from connectors.kafka import broker_ready, create_topics
from reference.otlp import SHARED_DATA, otlp_json_lines, spans_of_file
from stormwatch.config import load
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


def _config(folder: Path, port: int, controller: int, password: str, credentials: bool) -> Path:
    login = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    client = f'{login} username="stormwatch" password="{password}";'
    path = folder / ("sasl.toml" if credentials else "anonymous.toml")
    path.write_text(f"""base = {str(TEST_CONFIG)!r}
runtime_dir = {str(folder / "runtime")!r}

[kafka]
bootstrap_servers = "127.0.0.1:{port}"

[kafka.properties]
{f'''"security.protocol" = "SASL_PLAINTEXT"
"sasl.mechanism" = "PLAIN"
"sasl.jaas.config" = '{client}'
''' if credentials else ""}
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
"listener.name.sasl_plaintext.plain.sasl.jaas.config" = '{login} username="stormwatch" password="{password}" user_stormwatch="{password}";'
""")
    return path


def test_a_sasl_broker_serves_the_tools_and_jobs_and_no_credential_is_logged(tmp_path):
    password = f"pw-{uuid.uuid4().hex}"
    port, controller = _free_port(), _free_port()
    sasl = _config(tmp_path, port, controller, password, credentials=True)
    config = load(sasl)
    job_log = flink_home() / "log"
    logged_before = {f: f.stat().st_size for f in job_log.glob("*.log")}
    broker = KafkaBroker(config)
    broker.start()
    try:
        assert not broker_ready(load(_config(tmp_path, port, controller, password, credentials=False)))
        names = {role: f"sasl_{role}" for role in ("source", "sink", "dead_letters")}
        create_topics(config, {name: {"partitions": 2} for name in names.values()})
        produce(config, names["source"], list(otlp_json_lines(TRACES)))

        result = stormwatch("run", "flatten_spans", "--", "--bounded", "--group-id", "sasl",
                            *[f"--topic={role}={name}" for role, name in names.items()], config=sasl)
        assert result.returncode == 0, result.stderr[-3000:]
        assert len(read_topic(config, names["sink"], len(spans_of_file(TRACES)))) == len(spans_of_file(TRACES))
    finally:
        broker.stop()

    assert password not in result.stdout + result.stderr
    for log in job_log.glob("*.log"):
        with log.open("rb") as f:
            f.seek(logged_before.get(log, 0))
            assert password.encode() not in f.read(), log
    # The broker's own configuration holds the password; what it and the clients log does not.
    for path in (tmp_path / "runtime").rglob("*"):
        if path.is_file() and path.name != "server.properties":
            assert password.encode() not in path.read_bytes(), path
