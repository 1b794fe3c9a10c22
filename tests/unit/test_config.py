from pathlib import Path

import pytest

from stormwatch.config import DEFAULT_CONFIG, ConfigError, load


def test_default_configuration_loads_and_names_every_topic_the_jobs_use():
    config = load(DEFAULT_CONFIG)
    assert {"otlp_spans", "stormwatch_spans", "stormwatch_dead_letters"} <= config.topics.keys()
    assert config.section("pipeline", "spans")["source_topic"] == "otlp_spans"
    assert all(int(spec["partitions"]) >= 2 for name, spec in config.topics.items() if name.startswith("otlp_"))


def test_a_file_with_base_overrides_only_what_it_names(tmp_path: Path):
    (tmp_path / "base.toml").write_text('runtime_dir = "a"\n[kafka]\nbootstrap_servers = "x:1"\n[kafka.local]\nport = 1\nhost = "h"\n')
    (tmp_path / "over.toml").write_text('base = "base.toml"\n[kafka.local]\nport = 2\n')
    config = load(tmp_path / "over.toml")
    assert config.get("kafka", "local", "port") == 2
    assert config.get("kafka", "local", "host") == "h"
    assert config.bootstrap_servers == "x:1"


def test_bases_that_include_each_other_are_an_error_not_a_loop(tmp_path: Path):
    (tmp_path / "a.toml").write_text('base = "b.toml"\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\n')
    with pytest.raises(ConfigError, match="include each other"):
        load(tmp_path / "a.toml")


def test_missing_file_and_missing_key_are_clear_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "nope.toml")
    (tmp_path / "c.toml").write_text("[kafka]\n")
    with pytest.raises(ConfigError, match="kafka.bootstrap_servers"):
        _ = load(tmp_path / "c.toml").bootstrap_servers
