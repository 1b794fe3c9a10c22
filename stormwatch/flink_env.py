"""The one way stormwatch jobs get a Flink table environment, locally or on a cluster."""

from __future__ import annotations

from pyflink.table import EnvironmentSettings, TableEnvironment

from stormwatch.config import Config


class MissingJarError(FileNotFoundError):
    pass


def connector_jars(config: Config) -> list[str]:
    jars = sorted((config.jars_dir / "flink").glob("flink-sql-connector-kafka-*.jar"))
    if not jars:
        raise MissingJarError(f"no Flink Kafka connector in {config.jars_dir / 'flink'}: run `make bootstrap` first")
    return [j.as_uri() for j in jars]


def table_environment(config: Config, job_name: str) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = t_env.get_config()
    # Shipped with the job either way: on the embedded mini-cluster it is the only copy; on a
    # standalone cluster the same jar in lib/ wins (org.apache.flink classes load parent-first).
    conf.set("pipeline.jars", ";".join(connector_jars(config)))
    conf.set("parallelism.default", str(config.get("flink", "parallelism")))
    for key, value in config.section("flink", "job_config").items():
        conf.set(key, str(value))
    conf.set("pipeline.name", job_name)
    return t_env
