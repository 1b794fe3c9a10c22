"""docker-compose.yml and docker/flink/Dockerfile agree with the project they run (no Docker needed)."""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from stormwatch.config import load
from stormwatch import job_registry
from stormwatch.job_registry import CHAIN
from stormwatch.runtime.flink_cluster import PYTHON_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SERVICES = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
CONFIG = load(ROOT / "config" / "stormwatch.toml")
DOCKER_CONFIG = load(ROOT / "config" / "docker.toml")
# Where the Dockerfile puts the project; /opt/stormwatch/<path> in the image is <path> here.
IMAGE_HOME = "/opt/stormwatch"


def builds() -> set[tuple[Path, Path]]:
    """(context, Dockerfile) of every service that is built."""
    return {
        (ROOT / s["build"]["context"], ROOT / s["build"]["context"] / s["build"].get("dockerfile", "Dockerfile"))
        for s in SERVICES.values()
        if "build" in s
    }


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comments dropped."""
    result, pending = [], ""
    for line in dockerfile.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pending += line.removesuffix("\\").strip() + " "
        if not line.endswith("\\"):
            keyword, _, arguments = pending.strip().partition(" ")
            result.append((keyword.upper(), arguments.strip()))
            pending = ""
    return result


def assignments(dockerfile: Path, keyword: str) -> dict[str, str]:
    """The NAME=value pairs of every ARG (or every ENV) instruction."""
    words = [w for kw, args in instructions(dockerfile) if kw == keyword for w in shlex.split(args)]
    return dict(w.split("=", 1) for w in words)


def copy_sources(dockerfile: Path) -> list[str]:
    """What the COPY instructions take from the build context (flags and destinations dropped; a
    COPY --from= takes from another stage)."""
    sources = []
    for keyword, arguments in instructions(dockerfile):
        words = shlex.split(arguments)
        if keyword == "COPY" and not any(w.startswith("--from=") for w in words):
            sources += [w for w in words if not w.startswith("--")][:-1]
    return sources


def pom_property(name: str) -> str:
    pom = ET.parse(ROOT / "jvm" / "pom.xml")
    return pom.findtext(f"m:properties/m:{name}", namespaces={"m": "http://maven.apache.org/POM/4.0.0"})


def published_ports(service: str) -> set[int]:
    # Short syntax, [HOST_IP:]HOST_PORT:CONTAINER_PORT.
    return {int(str(p).split(":")[-2]) for p in SERVICES[service].get("ports", [])}


def command_values(service: str, flag: str) -> list[str]:
    """Every word that follows `flag` in the service's command."""
    command = SERVICES[service]["command"]
    words = shlex.split(command if isinstance(command, str) else " ".join(command))
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == flag]


def in_repo(container_path: str) -> Path:
    assert container_path.startswith(IMAGE_HOME), container_path
    return ROOT / container_path.removeprefix(IMAGE_HOME).lstrip("/")


def flink_properties(service: str) -> dict:
    return yaml.safe_load(SERVICES[service]["environment"]["FLINK_PROPERTIES"])


def keys(node: dict, prefix: str = "") -> set[str]:
    """Every dotted key of a configuration, tables included."""
    out = set()
    for key, value in node.items():
        out.add(prefix + key)
        if isinstance(value, dict):
            out |= keys(value, f"{prefix}{key}.")
    return out


def test_builds_exist():
    assert builds()
    for context, dockerfile in builds():
        assert context.is_dir(), context
        assert dockerfile.is_file(), dockerfile


def test_copy_sources_exist():
    for context, dockerfile in builds():
        for source in copy_sources(dockerfile):
            assert (context / source).exists(), f"{dockerfile}: COPY {source}"


def test_image_has_every_python_package_with_files():
    copied = {s.rstrip("/") for _, dockerfile in builds() for s in copy_sources(dockerfile)}
    for package in PYTHON_PACKAGES:
        if any((ROOT / package).rglob("*.py")):
            assert package in copied, f"{package}/ is not copied into the image"


def test_project_paths_in_image_exist():
    paths = re.findall(rf"{IMAGE_HOME}[\w./-]*", COMPOSE_FILE.read_text())
    for _, dockerfile in builds():
        env = assignments(dockerfile, "ENV")
        assert env["STORMWATCH_HOME"] == IMAGE_HOME
        paths += [v for v in env.values() if v.startswith(IMAGE_HOME)]
    assert f"{IMAGE_HOME}/config/docker.toml" in paths
    for path in paths:
        assert in_repo(path).exists(), path


def submit_script() -> str:
    return " ".join(SERVICES["submit"]["command"])


def test_submit_runs_the_whole_chain_on_the_configured_jobmanager():
    jobs = command_values("submit", "-py")
    for job in jobs:
        assert in_repo(job).is_file(), job
    # Every job of the product, each submitted once: what the demo runs.
    assert sorted(Path(job).stem for job in jobs) == sorted(CHAIN)
    rest = f"{DOCKER_CONFIG.get('flink', 'rest_address')}:{DOCKER_CONFIG.get('flink', 'rest_port')}"
    assert set(command_values("submit", "-m")) == {rest}
    # One `flink list` per job, on the same JobManager, before its `flink run`.
    assert submit_script().count("flink list --running") == len(CHAIN)


def test_submit_skips_only_the_job_that_is_running():
    """Each job is looked for under the name it runs as (jobs/*.py: `stormwatch-<job>`), so starting
    the service again submits exactly the jobs that are not running."""
    script = submit_script()
    for job in CHAIN:
        source = job_registry.path(job).read_text()
        assert f'JOB = "{job}"' in source and 'f"stormwatch-{JOB}"' in source, job
        looked_for = script.index(f"grep -q ' : stormwatch-{job} ('")
        submitted = script.index(f"-py {IMAGE_HOME}/jobs/{job}.py")
        assert looked_for < submitted
        # Nothing between the check and the job's own `flink run` submits another job.
        assert script[looked_for:submitted].count("flink run") == 1
    assert "--detached" in script and script.count("flink run --detached") == len(CHAIN)
    # Compose would substitute $NAME itself, before bash sees it.
    assert "$" not in script.replace("$$", "")


def test_taskmanager_has_a_slot_for_every_subtask_of_every_job():
    flink = DOCKER_CONFIG.section("flink")
    props = flink_properties("taskmanager")
    assert props["taskmanager.numberOfTaskSlots"] >= len(CHAIN) * flink["parallelism"]


def test_published_ports_are_the_configured_ones():
    assert published_ports("kafka") == {CONFIG.get("kafka", "local", "port")}
    assert published_ports("jobmanager") == {CONFIG.get("flink", "rest_port")}


def test_kafka_advertises_the_addresses_clients_use():
    advertised = SERVICES["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert f"://{DOCKER_CONFIG.bootstrap_servers}" in advertised
    assert f"://localhost:{CONFIG.get('kafka', 'local', 'port')}" in advertised


def test_docker_config_has_the_same_topics_and_keys():
    assert DOCKER_CONFIG.topics == CONFIG.topics
    # Flink's own settings may differ; stormwatch's must all be there, none misspelt.
    ours = {k for k in keys(DOCKER_CONFIG.data) if not k.startswith("flink.job_config.")}
    assert ours == {k for k in keys(CONFIG.data) if not k.startswith("flink.job_config.")}


def test_checkpoints_are_on_a_volume_every_flink_container_mounts():
    for key in ("execution.checkpointing.dir", "execution.checkpointing.savepoint-dir"):
        path = DOCKER_CONFIG.get("flink", "job_config", key).removeprefix("file://")
        for service in ("jobmanager", "taskmanager"):
            mounts = [v.split(":")[1] for v in SERVICES[service]["volumes"]]
            assert any(path.startswith(m + "/") for m in mounts), (service, key)


def test_flink_properties_match_the_config():
    flink = DOCKER_CONFIG.section("flink")
    for service in ("jobmanager", "taskmanager"):
        props = flink_properties(service)
        assert props["jobmanager.rpc.address"] == flink["rest_address"]
        assert flink["rest_address"] in SERVICES
        assert props["taskmanager.numberOfTaskSlots"] == flink["taskmanager_slots"]
        assert props["parallelism.default"] == flink["parallelism"]
        assert props["jobmanager.memory.process.size"] == flink["jobmanager_memory"]
        assert props["taskmanager.memory.process.size"] == flink["taskmanager_memory"]
        # flink run names the same interpreters as the cluster configuration.
        assert set(command_values("submit", "--pyExecutable")) == {props["python.executable"]}
        assert set(command_values("submit", "--pyClientExecutable")) == {props["python.client.executable"]}


def test_versions_match_the_pom_and_the_jars_come_from_it():
    for _, dockerfile in builds():
        *_, base = [args for kw, args in instructions(dockerfile) if kw == "FROM"]
        assert base.startswith(f"flink:{pom_property('flink.version')}-"), base
        assert any(kw == "RUN" and "mvn" in args and "jvm/pom.xml" in args for kw, args in instructions(dockerfile))
        assert any(kw == "COPY" and args.startswith("--from=jars ") and "runtime/jars/flink/" in args
                   for kw, args in instructions(dockerfile))


def test_the_jars_are_built_from_every_java_module():
    """jvm/pom.xml builds modules outside jvm/ too (connectors/java/, udfs/java/): the image has each."""
    pom = ET.parse(ROOT / "jvm" / "pom.xml")
    modules = [(ROOT / "jvm" / m.text).resolve().relative_to(ROOT)
               for m in pom.findall("m:modules/m:module", namespaces={"m": "http://maven.apache.org/POM/4.0.0"})]
    assert Path("connectors/java") in modules and Path("udfs/java") in modules, modules
    for _, dockerfile in builds():
        # The COPYs of the stage that runs Maven (FROM ... AS jars), up to the next FROM.
        copied, stage = [], None
        for keyword, arguments in instructions(dockerfile):
            if keyword == "FROM":
                stage = arguments.split()[-1] if " AS " in arguments.upper() else None
            elif keyword == "COPY" and stage == "jars":
                copied += [Path(w) for w in shlex.split(arguments) if not w.startswith("--")][:-1]
        for module in modules:
            assert any(c == module or c in module.parents for c in copied), f"{dockerfile}: no COPY of {module}/"


def test_dependencies_exist_and_health_is_checked():
    for name, service in SERVICES.items():
        for dependency, how in service.get("depends_on", {}).items():
            assert dependency in SERVICES, f"{name} depends on unknown {dependency}"
            if how["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[dependency], f"{dependency} has no healthcheck"
