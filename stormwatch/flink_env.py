"""The one way stormwatch jobs get a Flink table environment, locally or on a cluster."""

from __future__ import annotations

import os
import site
import sys
from contextlib import contextmanager
from typing import Iterator

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.table import EnvironmentSettings, StreamTableEnvironment, TableEnvironment

from stormwatch.config import PROJECT_ROOT, Config


class MissingJarError(FileNotFoundError):
    pass


def job_jars(config: Config) -> list[str]:
    """What every job ships in pipeline.jars: the Kafka connector, and the pieces beside it (our jars:
    the `otlp` format, the trace assembler, the SQL functions; the OTLP classes and protobuf runtime);
    not the SQL client's gateway."""
    folder = config.jars_dir / "flink"
    if not list(folder.glob("flink-sql-connector-kafka-*.jar")):
        raise MissingJarError(f"no Flink Kafka connector in {folder}: run `make bootstrap` first")
    return [j.as_uri() for j in sorted(folder.glob("*.jar")) if not j.name.startswith("flink-sql-gateway-")]


def job_configuration(config: Config, job_name: str, restore_from: str | None = None) -> dict[str, str]:
    """Everything a job sets in Flink; `restore_from`: a savepoint or retained checkpoint to start from."""
    return {
        # Shipped with the job either way: on the embedded mini-cluster it is the only copy; on a
        # standalone cluster the connector in lib/ wins (org.apache.flink classes load parent-first).
        "pipeline.jars": ";".join(job_jars(config)),
        "parallelism.default": str(config.get("flink", "parallelism")),
        # Python functions run in this interpreter (the one with pyflink, pemja and our packages),
        # not whatever `python` is on the PATH. Thread mode embeds the interpreter in the JVM, which
        # does not see a virtualenv's packages unless they are on its path.
        "python.executable": sys.executable,
        # The project's own folder first, where it exists on the worker (the local cluster): every job a
        # TaskManager runs shares its one embedded interpreter and its imported modules, so packages
        # imported from a job's shipped copy (a temporary folder, deleted when that job ends) would
        # leave the next job unable to import what the first had not (ModuleNotFoundError after a
        # redeployment). Elsewhere the shipped copy (--pyFiles) is what is found.
        "python.pythonpath": os.pathsep.join([str(PROJECT_ROOT), *site.getsitepackages()]),
        # Checkpoints and savepoints beside the project's other runtime files, unless configured.
        "execution.checkpointing.dir": (config.runtime_dir / "flink" / "checkpoints").as_uri(),
        "execution.checkpointing.savepoint-dir": config.savepoints_dir.as_uri(),
        **{key: str(value) for key, value in config.section("flink", "job_config").items()},
        "pipeline.name": job_name,
        **({"execution.state-recovery.path": restore_from} if restore_from else {}),
    }


def table_environment(config: Config, job_name: str, restore_from: str | None = None) -> TableEnvironment:
    """For jobs that are all SQL."""
    if _shared is not None:
        return stream_table_environment(config, job_name, restore_from)
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for key, value in job_configuration(config, job_name, restore_from).items():
        t_env.get_config().set(key, value)
    return t_env


def stream_table_environment(config: Config, job_name: str, restore_from: str | None = None) -> StreamTableEnvironment:
    """For jobs that hand per-window records from SQL tables to Python functions and back. Inside
    `one_job_graph`, a table environment of its own (its own temporary tables and views) on the shared
    execution environment."""
    if _shared is not None:
        if restore_from:
            raise ValueError("jobs run as one job graph start fresh: --from-savepoint is for a job of its own")
        return StreamTableEnvironment.create(_shared, EnvironmentSettings.in_streaming_mode())
    return StreamTableEnvironment.create(_execution_environment(config, job_name, restore_from),
                                         EnvironmentSettings.in_streaming_mode())


def _execution_environment(config: Config, job_name: str, restore_from: str | None = None) -> StreamExecutionEnvironment:
    conf = Configuration()
    for key, value in job_configuration(config, job_name, restore_from).items():
        conf.set_string(key, value)
    return StreamExecutionEnvironment.get_execution_environment(conf)


# The execution environment the jobs of `one_job_graph` add their pipelines to; None otherwise.
_shared: StreamExecutionEnvironment | None = None


def shared_job_graph() -> bool:
    """True while jobs add their pipelines to one job graph instead of each submitting its own."""
    return _shared is not None


@contextmanager
def one_job_graph(config: Config, job_name: str) -> Iterator[StreamExecutionEnvironment]:
    """Several jobs as one Flink job on one embedded mini-cluster: inside this, each job's table
    environment shares one execution environment and `Inserts.execute` attaches the job's statements to
    it instead of submitting them; the caller executes the environment once. One JVM, one mini-cluster
    and one Python interpreter start instead of one per job, which is what the demo needs on a small
    machine. The jobs still talk through their Kafka topics, with their own consumer groups and
    transactional ids, exactly as when they run apart."""
    global _shared
    if _shared is not None:
        raise RuntimeError("one_job_graph is already open")
    _shared = _execution_environment(config, job_name)
    try:
        yield _shared
    finally:
        _shared = None
