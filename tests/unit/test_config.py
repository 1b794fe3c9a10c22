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


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(f"base = {str(DEFAULT_CONFIG)!r}\n{text}")
    return path


def test_an_unknown_key_is_an_error_naming_it_its_table_and_the_file(tmp_path: Path):
    path = _write(tmp_path, '[pipeline.spans]\nencodng = "otlp_proto"\n')
    with pytest.raises(ConfigError) as e:
        load(path)
    message = str(e.value)
    assert str(path) in message and "'encodng'" in message and "[pipeline.spans]" in message
    assert "did you mean 'encoding'?" in message
    with pytest.raises(ConfigError, match=r"unknown key 'runtime_dri' in the top level"):
        load(_write(tmp_path, 'runtime_dri = "x"\n'))
    with pytest.raises(ConfigError, match=r"unknown key 'paralelism' in \[flink\]; did you mean 'parallelism'"):
        load(_write(tmp_path, "[flink]\nparalelism = 4\n"))
    with pytest.raises(ConfigError, match=r"unknown table \[pipeline\.helth\]"):
        load(_write(tmp_path, "[pipeline.helth]\nstate_ttl_days = 1\n"))
    with pytest.raises(ConfigError, match=r"unknown key 'partitons' in \[topics\.otlp_spans\]"):
        load(_write(tmp_path, "[topics.otlp_spans]\npartitons = 4\n"))


def test_a_key_in_a_base_file_is_named_in_that_file(tmp_path: Path):
    (tmp_path / "base.toml").write_text('[kafka]\nbootstrap_server = "x:1"\n')
    (tmp_path / "over.toml").write_text('base = "base.toml"\n')
    with pytest.raises(ConfigError, match=r"base\.toml: unknown key 'bootstrap_server' in \[kafka\]"):
        load(tmp_path / "over.toml")


def test_tables_of_kafka_and_flink_settings_and_new_topics_take_any_key(tmp_path: Path):
    config = load(_write(tmp_path, """
[kafka.properties]
"security.protocol" = "SASL_SSL"
[kafka.local.server_properties]
"num.io.threads" = "4"
[flink.job_config]
"any.flink.key" = "1"
[flink.cluster_config]
"another.flink.key" = "2"
[flink.anything_flink_reads]
"x" = "y"
[pipeline.spans.source_properties]
"fetch.min.bytes" = "1"
[pipeline.suspects.policy]
min_calls = 3
[topics.my_own_topic]
partitions = 3
replication_factor = 3
config = { "retention.ms" = "1", "any.topic.config" = "2" }
"""))
    assert config.get("flink", "job_config", "any.flink.key") == "1"
    assert config.topics["my_own_topic"]["partitions"] == 3


def test_every_configuration_the_project_ships_has_only_known_keys():
    root = DEFAULT_CONFIG.parent.parent
    for path in [DEFAULT_CONFIG, root / "config" / "docker.toml", root / "tests" / "stormwatch-test.toml",
                 root / "bench" / "stormwatch-bench.toml"]:
        load(path)
