"""The local standalone Flink cluster (one JobManager, one TaskManager) from the apache-flink wheel.

The wheel carries a whole Flink distribution. Its scripts honour FLINK_CONF_DIR, FLINK_LIB_DIR,
FLINK_OPT_DIR, FLINK_LOG_DIR and FLINK_PID_DIR, so the cluster's configuration, classpath, logs and
pid files all live under <runtime_dir>/flink and nothing inside the virtualenv is changed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from stormwatch.config import CONFIG_ENV, HOME_ENV, PROJECT_ROOT, Config
from stormwatch.runtime.processes import ServiceError, pid_alive, require_free_ports, terminate, wait_until

# Project packages a job imports; shipped to the cluster with every `flink run -py`.
PYTHON_PACKAGES = ["stormwatch", "connectors", "udfs", "jobs"]


def flink_home() -> Path:
    import pyflink

    return Path(pyflink.__file__).resolve().parent


@dataclass(frozen=True)
class FlinkCluster:
    config: Config

    @property
    def home(self) -> Path:
        return self.config.runtime_dir / "flink"

    @property
    def rest_url(self) -> str:
        return f"http://{self.config.get('flink', 'rest_address')}:{self.config.get('flink', 'rest_port')}"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "FLINK_HOME": str(flink_home()),
            "FLINK_CONF_DIR": str(self.home / "conf"),
            "FLINK_LIB_DIR": str(self.home / "lib"),
            "FLINK_OPT_DIR": str(self.home / "opt"),
            "FLINK_LOG_DIR": str(self.home / "log"),
            "FLINK_PID_DIR": str(self.home / "pid"),
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def pids(self) -> list[int]:
        out = []
        for pid_file in (self.home / "pid").glob("flink-*.pid"):
            for line in pid_file.read_text().split():
                if line.isdigit() and pid_alive(int(line)):
                    out.append(int(line))
        return out

    def overview(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"{self.rest_url}/overview", timeout=2) as r:
                return json.load(r)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def ready(self) -> bool:
        ov = self.overview()
        return bool(ov) and ov.get("taskmanagers", 0) >= 1 and ov.get("slots-total", 0) >= 1

    def status(self) -> str:
        pids = self.pids()
        if not pids:
            return f"flink: not running (would serve {self.rest_url})"
        ov = self.overview()
        if not ov:
            return f"flink: processes {pids} running, REST {self.rest_url} not answering yet"
        return (
            f"flink: running, {self.rest_url}, {ov['taskmanagers']} taskmanager(s), "
            f"{ov['slots-available']}/{ov['slots-total']} slots free, {ov['jobs-running']} job(s) running"
        )

    def start(self, timeout: float = 120.0) -> str:
        if self.pids():
            return f"flink: already running, {self.rest_url} (pids {self.pids()})"
        host = self.config.get("flink", "rest_address")
        require_free_ports(
            "flink",
            host,
            {"REST": int(self.config.get("flink", "rest_port")), "RPC": int(self.config.get("flink", "rpc_port"))},
        )
        self._prepare()
        result = self._script("start-cluster.sh")
        if result.returncode != 0:
            raise ServiceError(f"start-cluster.sh failed:\n{result.stdout}{result.stderr}")
        try:
            wait_until(self.ready, timeout, f"flink REST at {self.rest_url} with a taskmanager")
        except ServiceError:
            raise ServiceError(
                f"flink did not become ready in {timeout:.0f} s; logs in {self.home / 'log'}"
            ) from None
        return f"flink: started, web UI and REST at {self.rest_url}"

    def stop(self) -> str:
        pids = self.pids()
        if not pids:
            return "flink: not running, nothing to stop"
        self._script("stop-cluster.sh")
        # stop-cluster.sh gives each process 10 s; make sure none outlives the command.
        for pid in pids:
            terminate(pid, timeout=20.0)
        for pid_file in (self.home / "pid").glob("flink-*.pid"):
            pid_file.unlink(missing_ok=True)
        return f"flink: stopped (pids {pids})"

    # -- jobs ----------------------------------------------------------------------------------

    def submit(self, job: Path, job_args: list[str], detached: bool = True) -> str:
        """`flink run -py` the job on this cluster; returns the Flink job id."""
        if not self.ready():
            raise ServiceError(f"flink is not running at {self.rest_url}: run `stormwatch flink start` first")
        command = [
            "bash", str(flink_home() / "bin" / "flink"), "run",
            *(["--detached"] if detached else []),
            "--python", str(job),
            "--pyFiles", str(self._package_archive()),
            "--pyClientExecutable", sys.executable,
            "--pyExecutable", sys.executable,
            *job_args,
        ]
        env = {**self.env(), HOME_ENV: str(PROJECT_ROOT), CONFIG_ENV: str(self.config.path)}
        result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=PROJECT_ROOT)
        match = re.search(r"JobID ([0-9a-f]{32})", result.stdout + result.stderr)
        if result.returncode != 0 or not match:
            raise ServiceError(f"flink run failed (exit {result.returncode}):\n{result.stdout[-4000:]}{result.stderr[-4000:]}")
        return match.group(1)

    def sql_client(self, init_statements: list[str], script: Path | None = None) -> int:
        """The distribution's sql-client.sh against this cluster, with the project's tables defined."""
        if not self.ready():
            raise ServiceError(f"flink is not running at {self.rest_url}: run `stormwatch flink start` first")
        init = self.home / "sql-client-init.sql"
        init.write_text("".join(f"{s};\n\n" for s in init_statements))
        command = ["bash", str(flink_home() / "bin" / "sql-client.sh"), "embedded", "--init", str(init)]
        if script is not None:
            command += ["--file", str(script)]
        return subprocess.run(command, env=self.env(), cwd=PROJECT_ROOT).returncode

    def jobs(self) -> list[dict]:
        return self._rest("GET", "/jobs/overview")["jobs"]

    def cancel(self, job_id: str) -> None:
        self._rest("PATCH", f"/jobs/{job_id}?mode=cancel")

    def stop_with_savepoint(self, job_id: str, timeout: float = 300.0) -> str:
        """Stop the job after a savepoint (its sinks commit what they hold); returns the savepoint's
        path, for `--from-savepoint` of the job started in its place."""
        trigger = self._rest("POST", f"/jobs/{job_id}/stop",
                             {"drain": False, "targetDirectory": self.config.savepoints_dir.as_uri()})["request-id"]
        status: dict = {}

        def done() -> bool:
            nonlocal status
            status = self._rest("GET", f"/jobs/{job_id}/savepoints/{trigger}")
            return status["status"]["id"] == "COMPLETED"

        wait_until(done, timeout, f"the savepoint of job {job_id}", interval=1.0)
        operation = status["operation"]
        if "failure-cause" in operation:
            raise ServiceError(f"stopping job {job_id} with a savepoint failed: {operation['failure-cause']}")
        return operation["location"]

    def checkpoints(self, job_id: str) -> dict:
        """The job's checkpoint statistics as the web UI shows them: `counts` (completed, failed,
        restored...) and `latest` (the last completed one, its state size...)."""
        return self._rest("GET", f"/jobs/{job_id}/checkpoints")

    def job(self, job_id: str) -> dict:
        """The job's details: its state, and its vertices (id, name, parallelism, status)."""
        return self._rest("GET", f"/jobs/{job_id}")

    def metrics(self, job_id: str, names: list[str] | None = None, vertex_id: str | None = None) -> list[dict]:
        """The job's metrics, or a vertex's aggregated over its subtasks (min, max, sum, avg): the ids
        there are without `names`, their values with. As fresh as metrics.fetcher.update-interval."""
        path = f"/jobs/{job_id}" + (f"/vertices/{vertex_id}/subtasks" if vertex_id else "") + "/metrics"
        query = "" if names is None else "?get=" + urllib.parse.quote(",".join(names))
        return self._rest("GET", path + query)

    def _rest(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.rest_url}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
        return json.loads(text) if text.strip() else {}

    # -- task managers -------------------------------------------------------------------------

    def taskmanager_pids(self) -> list[int]:
        return [pid for pid_file in (self.home / "pid").glob("flink-*-taskexecutor.pid")
                for pid in map(int, pid_file.read_text().split()) if pid_alive(pid)]

    def start_taskmanager(self) -> None:
        """One more TaskManager, e.g. in place of one that died: jobs waiting for slots resume."""
        result = subprocess.run(["bash", str(flink_home() / "bin" / "taskmanager.sh"), "start"],
                                env=self.env(), capture_output=True, text=True)
        if result.returncode != 0:
            raise ServiceError(f"taskmanager.sh start failed:\n{result.stdout}{result.stderr}")

    def _package_archive(self) -> Path:
        """The project's packages as one zip: PyFlink puts a zip itself on the workers' sys.path,
        so `import connectors.kafka` works there (a shipped folder would be put on the path itself).
        Not a package's java/ folder (connectors/, udfs/): that code ships as jars, in pipeline.jars."""
        archive = self.home / "stormwatch-python.zip"
        archive.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            for package in PYTHON_PACKAGES:
                for f in sorted((PROJECT_ROOT / package).rglob("*")):
                    inside = f.relative_to(PROJECT_ROOT / package).parts
                    if f.is_file() and "__pycache__" not in f.parts and inside[0] != "java":
                        z.write(f, f.relative_to(PROJECT_ROOT))
        return archive

    # -- files ---------------------------------------------------------------------------------

    def _script(self, name: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(flink_home() / "bin" / name)], env=self.env(), capture_output=True, text=True
        )

    def _prepare(self) -> None:
        dist = flink_home()
        jars = self.config.jars_dir / "flink"
        connector = sorted(jars.glob("flink-sql-connector-kafka-*.jar"))
        gateway = sorted(jars.glob("flink-sql-gateway-*.jar"))
        if not connector or not gateway:
            raise ServiceError(f"Flink jars missing in {jars}: run `make bootstrap` first")
        for sub in ("conf", "lib", "opt", "log", "pid", "tmp"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        # lib/ and opt/ are the distribution's plus ours, as links: nothing is copied or changed.
        # flink-python goes to lib/ too: the JobManager must load the Python operators of a
        # DataStream job's graph (EmbeddedPythonProcessOperator) before any job jar is there.
        _link_all(self.home / "lib", [*(dist / "lib").glob("*.jar"), *(dist / "opt").glob("flink-python-*.jar"), *connector])
        _link_all(self.home / "opt", [*(dist / "opt").glob("*.jar"), *gateway])
        for f in (dist / "conf").iterdir():
            if f.name != "config.yaml":
                shutil.copyfile(f, self.home / "conf" / f.name)
        (self.home / "conf" / "config.yaml").write_text(yaml.safe_dump(self.flink_configuration(), sort_keys=True))

    def flink_configuration(self) -> dict[str, str]:
        """The distribution's config.yaml (it carries the JVM flags Java 17 needs) with ours on top."""
        with (flink_home() / "conf" / "config.yaml").open() as f:
            base = _flatten(yaml.safe_load(f) or {})
        c = self.config.section("flink")
        ours = {
            "jobmanager.rpc.address": "localhost",
            "jobmanager.rpc.port": c["rpc_port"],
            "jobmanager.bind-host": "localhost",
            "taskmanager.bind-host": "localhost",
            "taskmanager.host": "localhost",
            "rest.address": c["rest_address"],
            "rest.bind-address": c["rest_address"],
            "rest.port": c["rest_port"],
            "taskmanager.numberOfTaskSlots": c["taskmanager_slots"],
            "parallelism.default": c["parallelism"],
            "jobmanager.memory.process.size": c["jobmanager_memory"],
            "taskmanager.memory.process.size": c["taskmanager_memory"],
            "env.pid.dir": str(self.home / "pid"),
            "env.log.dir": str(self.home / "log"),
            "io.tmp.dirs": str(self.home / "tmp"),
            "web.tmpdir": str(self.home / "tmp"),
            # The TaskManager runs Python UDFs with this virtualenv's interpreter (pyflink, our deps).
            "python.executable": sys.executable,
            "python.client.executable": sys.executable,
            **c.get("cluster_config", {}),
        }
        return {**base, **{k: str(v) for k, v in ours.items()}}


def _flatten(node: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, str):
            out[name] = value
        else:
            # YAML lists and booleans as Flink reads them back: [a, b] and true/false.
            out[name] = json.dumps(value)
    return out


def _link_all(folder: Path, targets: list[Path]) -> None:
    for old in folder.iterdir():
        old.unlink()
    for target in targets:
        (folder / target.name).symlink_to(target)
