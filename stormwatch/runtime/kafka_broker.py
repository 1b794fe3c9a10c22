"""The local Apache Kafka broker: one KRaft node (broker + controller) run with `java`.

Its jars come from Maven Central through jvm/pom.xml; its configuration, data and logs live under
<runtime_dir>/kafka so two checkouts never share state.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from stormwatch.config import Config
from stormwatch.runtime.processes import (
    ServiceError,
    port_answers,
    read_pid,
    require_free_ports,
    terminate,
    wait_until,
)

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class KafkaBroker:
    config: Config

    @property
    def host(self) -> str:
        return self.config.get("kafka", "local", "host")

    @property
    def port(self) -> int:
        return int(self.config.get("kafka", "local", "port"))

    @property
    def controller_port(self) -> int:
        return int(self.config.get("kafka", "local", "controller_port"))

    @property
    def home(self) -> Path:
        return self.config.runtime_dir / "kafka"

    @property
    def pid_file(self) -> Path:
        return self.home / "kafka.pid"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def jars(self) -> Path:
        return self.config.jars_dir / "kafka"

    def pid(self) -> int | None:
        return read_pid(self.pid_file)

    def status(self) -> str:
        pid = self.pid()
        if pid is None:
            return f"kafka: not running (would listen on {self.host}:{self.port})"
        state = "ready" if port_answers(self.host, self.port) else "starting"
        return f"kafka: running, {state}, pid {pid}, {self.host}:{self.port}, data in {self.data_dir}"

    def start(self, timeout: float = 60.0) -> str:
        pid = self.pid()
        if pid is not None:
            return f"kafka: already running (pid {pid}) on {self.host}:{self.port}"
        if not any(self.jars.glob("kafka_2.13-*.jar")):
            raise ServiceError(f"kafka jars missing in {self.jars}: run `make bootstrap` first")
        require_free_ports("kafka", self.host, {"broker": self.port, "controller": self.controller_port})
        for d in (self.home, self.data_dir, self.logs_dir):
            d.mkdir(parents=True, exist_ok=True)
        properties = self._write_config()
        if not (self.data_dir / "meta.properties").exists():
            self._format(properties)
        out = (self.logs_dir / "kafka.out").open("ab")
        proc = subprocess.Popen(
            self._java(["kafka.Kafka", str(properties)]),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # survives the CLI; stopped through the pid file
        )
        self.pid_file.write_text(f"{proc.pid}\n")
        try:
            wait_until(
                lambda: proc.poll() is None and port_answers(self.host, self.port) and self._answers_metadata(),
                timeout,
                f"kafka on {self.host}:{self.port}",
            )
        except ServiceError:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise ServiceError(
                    f"kafka exited with code {proc.returncode} while starting; see {self.logs_dir}/kafka.out "
                    f"and {self.logs_dir}/server.log"
                ) from None
            raise
        return f"kafka: started (pid {proc.pid}) on {self.host}:{self.port}"

    def stop(self) -> str:
        pid = self.pid()
        if pid is None:
            return "kafka: not running, nothing to stop"
        graceful = terminate(pid, timeout=45.0)
        self.pid_file.unlink(missing_ok=True)
        return f"kafka: stopped (pid {pid})" + ("" if graceful else ", killed after it did not stop in 45 s")

    def _answers_metadata(self) -> bool:
        # The port opens before the broker has joined its own quorum; a metadata answer means ready.
        from connectors.kafka import broker_ready

        return broker_ready(self.config)

    def _write_config(self) -> Path:
        local = self.config.section("kafka", "local")
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # Topics are created by `stormwatch topics create` with their partition counts, never by accident.
            "auto.create.topics.enable": "false",
            "num.partitions": "2",
            # One node: every internal topic has a single replica.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "transaction.max.timeout.ms": str(local["transaction_max_timeout_ms"]),
            # Anything else, as Kafka names it: other listeners, SASL, TLS...
            **{str(k): str(v) for k, v in local.get("server_properties", {}).items()},
        }
        path = self.home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        shutil.copyfile(TEMPLATES / "kafka-log4j2.yaml", self.home / "log4j2.yaml")
        return path

    def _format(self, properties: Path) -> None:
        result = subprocess.run(
            self._java(["kafka.tools.StorageTool", "format", "--config", str(properties),
                        "--cluster-id", new_cluster_id(), "--standalone", "--ignore-formatted"]),
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise ServiceError(f"formatting kafka storage in {self.data_dir} failed:\n{result.stdout}{result.stderr}")

    def _java(self, args: list[str]) -> list[str]:
        heap = self.config.get("kafka", "local", "heap")
        return [
            _java_binary(),
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.logs_dir}",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.yaml'}",
            "-cp",
            str(self.jars / "*"),
            *args,
        ]


def new_cluster_id() -> str:
    """A random KRaft cluster id. Like Kafka's own Uuid.randomUuid, never one starting with "-"
    (one in 64 of them), which kafka-storage's argument parser takes for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise ServiceError("java not found on PATH: Kafka and Flink need a Java 17 runtime")
    return java
