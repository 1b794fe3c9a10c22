"""The local runtime commands as a user meets them: idempotent starts, harmless stops, clear errors."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import TEST_CONFIG, stormwatch

pytestmark = pytest.mark.integration


def _config_with(tmp_path, body: str):
    path = tmp_path / "stormwatch.toml"
    path.write_text(f'base = "{TEST_CONFIG}"\nruntime_dir = "{tmp_path / "runtime"}"\n{body}')
    return path


def test_starting_kafka_twice_says_it_is_already_running(kafka):
    result = stormwatch("kafka", "start")
    assert result.returncode == 0
    assert "already running" in result.stdout and str(kafka.port) in result.stdout
    assert "running, ready" in stormwatch("kafka", "status").stdout


@pytest.mark.parametrize("service", ["kafka", "flink"])
def test_stopping_what_is_not_running_is_a_message_not_an_error(tmp_path, service):
    config = _config_with(tmp_path, "")
    result = stormwatch("--config", str(config), service, "stop")
    assert result.returncode == 0
    assert "not running, nothing to stop" in result.stdout
    assert "not running" in stormwatch("--config", str(config), service, "status").stdout


@pytest.mark.parametrize(
    "service, section, key",
    [("kafka", "kafka.local", "port"), ("kafka", "kafka.local", "controller_port"), ("flink", "flink", "rest_port")],
)
def test_a_port_already_taken_is_a_clear_error_naming_the_port(tmp_path, service, section, key):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        config = _config_with(tmp_path, f"[{section}]\n{key} = {port}\n")
        result = stormwatch("--config", str(config), service, "start")
    assert result.returncode == 1
    assert f"port {port}" in result.stderr and "already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_topics_are_created_once_with_partitions_and_configs_from_the_configuration(config, kafka):
    from kafka.admin import ConfigResource, ConfigResourceType

    from connectors.kafka import admin

    first = stormwatch("topics", "create")
    assert first.returncode == 0
    again = stormwatch("topics", "create").stdout.splitlines()
    assert sorted(again) == sorted(f"{name}: exists" for name in config.topics)

    client = admin(config)
    try:
        described = {t["name"]: t for t in client.describe_topics(list(config.topics))}
        configs = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in config.topics])
    finally:
        client.close()
    for name, spec in config.topics.items():
        assert len(described[name]["partitions"]) == spec["partitions"]
        for key, value in spec.get("config", {}).items():
            assert configs["topic"][name][key]["value"] == str(value), (name, key)
    assert configs["topic"]["stormwatch_policy"]["cleanup.policy"]["value"] == "compact"
