"""deploy/kubernetes/ holds manifests the Flink Kubernetes Operator accepts and that run this project:
each FlinkDeployment validates against the operator's CRD schema (a checked-in copy, with its source),
and the jobs, image, volume and configuration they name exist and agree (no Kubernetes needed)."""

from __future__ import annotations

import copy
import functools
import hashlib
import re
import shlex
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath

import jsonschema
import pytest
import yaml

from stormwatch.config import load
from stormwatch.job_registry import CHAIN
from tests.unit.test_docker_compose import keys  # every dotted key of a configuration

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
CRD_FILE = DEPLOY / "crds" / "flinkdeployments.flink.apache.org-v1.yml"
# Where docker/flink/Dockerfile puts the project: /opt/stormwatch/<path> in the image is <path> here.
IMAGE_HOME = "/opt/stormwatch"
CONFIG = load(ROOT / "config" / "stormwatch.toml")
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
# Flink's options of PythonDriver that take a value (flink run's Python options, short forms).
PYTHON_DRIVER_OPTIONS = {"-py", "-pym", "-pyfs", "-pyarch", "-pyreq", "-pyexec", "-pyclientexec", "-pypath"}
# The operator's rule for FlinkDeployment names (DefaultValidator.DEPLOYMENT_NAME_PATTERN, 1.15.0).
DEPLOYMENT_NAME = re.compile(r"[a-z]([-a-z\d]{0,43}[a-z\d])?")


def manifests() -> list[tuple[Path, dict]]:
    """Every Kubernetes object of deploy/kubernetes/*.yaml (not the CRD copy, not kustomization.yaml)."""
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def of_kind(kind: str) -> list[dict]:
    return [doc for _, doc in manifests() if doc["kind"] == kind]


DEPLOYMENTS = of_kind("FlinkDeployment")
(CONFIG_MAP,) = of_kind("ConfigMap")
(PVC,) = of_kind("PersistentVolumeClaim")
(TOPICS_JOB,) = of_kind("Job")


@functools.cache
def crd() -> dict:
    """Parsed once (half a megabyte): read it, never change it."""
    return yaml.safe_load(CRD_FILE.read_text())


def strict(schema: dict) -> dict:
    """The CRD's schema as the API server applies it: a field the schema does not name is refused
    (kubectl's strict field validation; pruned silently otherwise), except where the schema preserves
    unknown fields."""
    node = copy.deepcopy(schema)

    def walk(n):
        if isinstance(n, dict):
            if ("properties" in n and "additionalProperties" not in n
                    and not n.get("x-kubernetes-preserve-unknown-fields")):
                n["additionalProperties"] = False
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)

    walk(node)
    return node


@functools.cache
def resource_schema() -> dict:
    """The served version's openAPIV3Schema, with the fields every object has (the API server checks
    metadata itself)."""
    (version,) = [v for v in crd()["spec"]["versions"] if v["served"] and v["storage"]]
    schema = strict(version["schema"]["openAPIV3Schema"])
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    schema["properties"] |= {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object", "additionalProperties": False, "required": ["name"], "properties": {
            "name": {"type": "string"}, "namespace": {"type": "string"},
            "labels": string_map, "annotations": string_map}},
    }
    schema["required"] = ["apiVersion", "kind", "metadata", "spec"]
    return schema


@functools.cache
def validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(resource_schema())


def validate(resource: dict) -> None:
    validator().validate(resource)


def in_repo(container_path: str) -> Path:
    assert container_path.startswith(IMAGE_HOME + "/"), container_path
    return ROOT / container_path.removeprefix(IMAGE_HOME + "/")


def pom_property(name: str) -> str:
    pom = ET.parse(ROOT / "jvm" / "pom.xml")
    return pom.findtext(f"m:properties/m:{name}", namespaces={"m": "http://maven.apache.org/POM/4.0.0"})


def option(args: list[str], name: str) -> str:
    (value,) = [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
    return value


def main_container(pod_spec: dict) -> dict:
    (container,) = [c for c in pod_spec["containers"] if c["name"] == "flink-main-container"]
    return container


def env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def mounts(pod_spec: dict, container: dict) -> dict[str, dict]:
    """mount path -> the volume mounted there."""
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}


def kubernetes_config(tmp_path: Path):
    """The configuration the pods load: the ConfigMap's file over the image's base, loaded by
    stormwatch's own loader (its base pointed at this checkout's copy of the image's file)."""
    (name, text), = CONFIG_MAP["data"].items()
    base = tomllib.loads(text)["base"]
    assert in_repo(base).is_file(), base
    path = tmp_path / name
    path.write_text(text.replace(f'"{base}"', f'"{in_repo(base)}"', 1))
    return name, load(path)


# --- the CRD copy ---------------------------------------------------------------------------------

def test_crd_copy_names_its_source_and_is_unchanged():
    header, marker, body = CRD_FILE.read_text().partition("# --- upstream ---\n")
    assert marker and all(line.startswith("# ") for line in header.splitlines())
    assert re.search(r"github\.com/apache/flink-kubernetes-operator/blob/release-[\d.]+/helm/", header)
    assert re.search(r"Operator [\d.]+", header) and re.search(r"commit [0-9a-f]{40}", header)
    (digest,) = re.findall(r"sha256 .*: ([0-9a-f]{64})$", header, re.MULTILINE)
    assert hashlib.sha256(body.encode()).hexdigest() == digest
    resource = crd()
    assert resource["kind"] == "CustomResourceDefinition"
    assert resource["spec"]["names"]["kind"] == "FlinkDeployment"


def test_strict_schema_refuses_what_the_api_server_would():
    """The validation is not vacuous: a misspelt field, a wrong enum value, a wrong type all fail."""
    (good,) = [d for d in DEPLOYMENTS if d["metadata"]["name"].endswith("-spans")]
    validate(good)
    for path, value in ((("spec", "job", "upgradeMod"), "savepoint"), (("spec", "job", "upgradeMode"), "latest"),
                        (("spec", "flinkVersion"), "v2_9"), (("spec", "job", "parallelism"), "2"),
                        (("spec", "taskManager", "resources"), {"memory": "1g"})):
        bad = copy.deepcopy(good)
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)


# --- the FlinkDeployments -------------------------------------------------------------------------

def test_every_flink_deployment_matches_the_crd():
    assert DEPLOYMENTS
    group, version = crd()["spec"]["group"], [v["name"] for v in crd()["spec"]["versions"] if v["served"]]
    for deployment in DEPLOYMENTS:
        validate(deployment)
        api_group, api_version = deployment["apiVersion"].split("/")
        assert api_group == group and api_version in version
        assert DEPLOYMENT_NAME.fullmatch(deployment["metadata"]["name"])
        # Flat string values: what every operator version takes in flinkConfiguration.
        assert all(isinstance(v, str) for v in deployment["spec"]["flinkConfiguration"].values())


def test_the_deployments_run_the_whole_chain_in_application_mode():
    jobs = []
    flink_version = pom_property("flink.version")
    for deployment in DEPLOYMENTS:
        job = deployment["spec"]["job"]
        assert job["entryClass"] == "org.apache.flink.client.python.PythonDriver"
        # The PythonDriver of the image's Flink, which is jvm/pom.xml's.
        assert job["jarURI"] == f"local:///opt/flink/opt/flink-python-{flink_version}.jar"
        assert deployment["spec"]["flinkVersion"] == "v" + "_".join(flink_version.split(".")[:2])
        args = job["args"]
        # Flink's options first, each with its value; the job's own arguments after them.
        leading = args[:2 * sum(1 for a in args[::2] if a in PYTHON_DRIVER_OPTIONS)]
        assert all(a in PYTHON_DRIVER_OPTIONS for a in leading[::2])
        assert not any(a in PYTHON_DRIVER_OPTIONS for a in args[len(leading):])
        script = option(args, "-py")
        assert in_repo(script).is_file(), script
        name = PurePosixPath(script).stem
        assert deployment["metadata"]["name"] == f"stormwatch-{name}"
        jobs.append(name)
        # A job's upgrade keeps its state (the operator then requires both directories: DefaultValidator).
        assert job["upgradeMode"] == "savepoint"
    assert sorted(jobs) == sorted(CHAIN)


def test_the_python_driver_jar_is_where_flink_puts_it():
    pyflink = pytest.importorskip("pyflink")
    # The apache-flink wheel carries the distribution's opt/ as the image's /opt/flink/opt has it.
    for deployment in DEPLOYMENTS:
        jar = PurePosixPath(deployment["spec"]["job"]["jarURI"].removeprefix("local://"))
        assert (Path(pyflink.__file__).parent / "opt" / jar.name).is_file(), jar


def test_the_image_is_the_one_docker_flink_dockerfile_builds():
    built = {s["image"] for s in COMPOSE["services"].values()
             if s.get("build", {}).get("dockerfile") == "docker/flink/Dockerfile"}
    assert (ROOT / "docker" / "flink" / "Dockerfile").is_file()
    (image,) = built
    assert {d["spec"]["image"] for d in DEPLOYMENTS} == {image}
    assert {c["image"] for c in TOPICS_JOB["spec"]["template"]["spec"]["containers"]} == {image}
    # The interpreters the image has: those the compose file's cluster names.
    compose_props = yaml.safe_load(COMPOSE["services"]["jobmanager"]["environment"]["FLINK_PROPERTIES"])
    for deployment in DEPLOYMENTS:
        conf = deployment["spec"]["flinkConfiguration"]
        for key in ("python.executable", "python.client.executable"):
            assert conf[key] == compose_props[key]
        assert option(deployment["spec"]["job"]["args"], "-pyclientexec") == conf["python.client.executable"]


def test_checkpoints_savepoints_and_ha_are_on_the_shared_volume(tmp_path):
    _, config = kubernetes_config(tmp_path)
    job_config = config.section("flink", "job_config")
    assert "ReadWriteMany" in PVC["spec"]["accessModes"]
    for deployment in DEPLOYMENTS:
        conf = deployment["spec"]["flinkConfiguration"]
        pod = deployment["spec"]["podTemplate"]["spec"]
        state_mounts = [path for path, volume in mounts(pod, main_container(pod)).items()
                        if volume.get("persistentVolumeClaim", {}).get("claimName") == PVC["metadata"]["name"]]
        assert state_mounts
        # The operator's savepoints go where the job's own configuration puts them.
        for key in ("execution.checkpointing.dir", "execution.checkpointing.savepoint-dir"):
            assert conf[key] == job_config[key], key
        for key in ("execution.checkpointing.dir", "execution.checkpointing.savepoint-dir",
                    "high-availability.storageDir"):
            path = conf[key].removeprefix("file://")
            assert any(path.startswith(m + "/") for m in state_mounts), key
        assert conf["high-availability.type"] == "kubernetes"


def test_every_pod_loads_the_config_map(tmp_path):
    name, _ = kubernetes_config(tmp_path)
    pods = [d["spec"]["podTemplate"]["spec"] for d in DEPLOYMENTS] + [TOPICS_JOB["spec"]["template"]["spec"]]
    for pod in pods:
        containers = pod["containers"]
        container = main_container(pod) if any(c["name"] == "flink-main-container" for c in containers) else containers[0]
        config_path = PurePosixPath(env(container)["STORMWATCH_CONFIG"])
        assert config_path.name == name
        volume = mounts(pod, container)[str(config_path.parent)]
        assert volume["configMap"]["name"] == CONFIG_MAP["metadata"]["name"]


def test_the_config_map_names_only_keys_the_project_knows(tmp_path):
    """stormwatch's loader takes any key; a misspelt one here would be silently ignored."""
    (_, text), = CONFIG_MAP["data"].items()
    own = tomllib.loads(text)
    own.pop("base")
    known = keys(CONFIG.data)
    for key in keys(own):
        assert key in known or key.startswith("flink.job_config."), key
    _, config = kubernetes_config(tmp_path)
    assert config.topics == CONFIG.topics


def test_parallelism_and_slots_match_the_config(tmp_path):
    _, config = kubernetes_config(tmp_path)
    for deployment in DEPLOYMENTS:
        parallelism = deployment["spec"]["job"]["parallelism"]
        # The job sets parallelism.default from the configuration itself (stormwatch.flink_env).
        assert parallelism == config.get("flink", "parallelism")
        assert int(deployment["spec"]["flinkConfiguration"]["taskmanager.numberOfTaskSlots"]) >= parallelism


def test_prometheus_reporter_is_on_and_its_port_exposed():
    cluster = CONFIG.section("flink", "cluster_config")
    low, high = (int(p) for p in str(cluster["metrics.reporter.prom.port"]).split("-"))
    for deployment in DEPLOYMENTS:
        conf = deployment["spec"]["flinkConfiguration"]
        assert conf["metrics.reporter.prom.factory.class"] == cluster["metrics.reporter.prom.factory.class"]
        port = int(conf["metrics.reporter.prom.port"])
        # A pod has its own address: the first port of the local cluster's range serves.
        assert low <= port <= high
        template = deployment["spec"]["podTemplate"]
        ports = {p["containerPort"] for p in main_container(template["spec"]).get("ports", [])}
        assert port in ports
        assert template["metadata"]["annotations"]["prometheus.io/port"] == str(port)


def test_the_topics_job_runs_a_command_the_cli_has():
    (container,) = TOPICS_JOB["spec"]["template"]["spec"]["containers"]
    program, *command = container["command"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert program in pyproject["project"]["scripts"]
    assert command == ["topics", "create"]
    cli = (ROOT / "stormwatch" / "cli.py").read_text()
    assert 'args.action == "create"' in cli


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert sorted(listed) == sorted({p.name for p, _ in manifests()})
    for name in listed:
        assert (DEPLOY / name).is_file()


def test_readme_says_why_application_mode():
    readme = (DEPLOY / "README.md").read_text()
    assert "application mode" in readme.lower()
    for name in [p.name for p, _ in manifests()]:
        assert name in readme, name
    for line in readme.splitlines():
        if line.startswith("kubectl apply"):
            for word in shlex.split(line):
                if word.startswith("deploy/kubernetes/"):
                    assert (ROOT / word).exists(), word
