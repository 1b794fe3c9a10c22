"""One job registry (stormwatch/job_registry.py): the files of jobs/ and the README's job table say
what it says."""

import ast
import re

import pytest

from stormwatch import job_registry
from stormwatch.config import ConfigError, PROJECT_ROOT


def _defines_main(path) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in ast.parse(path.read_text()).body)


def test_every_registered_job_is_a_program_of_jobs_and_every_program_is_registered():
    for name in job_registry.names():
        assert _defines_main(job_registry.path(name)), name
    programs = {p.stem for p in job_registry.JOBS_DIR.glob("*.py") if _defines_main(p)}
    assert programs == set(job_registry.names())


def test_an_unknown_job_is_an_error_naming_the_jobs():
    with pytest.raises(ConfigError, match="no job 'nope'; jobs: flatten_spans, health, scaling, spans, suspects"):
        job_registry.path("nope")


def test_the_chain_is_spans_then_health_then_scaling():
    # Each reads what the one before publishes: the order the demo starts them in.
    assert job_registry.CHAIN == ["spans", "health", "scaling"]


def test_the_readme_job_table_is_the_registry():
    readme = (PROJECT_ROOT / "README.md").read_text()
    header = "| job | what it does | in the whole chain |"
    assert header in readme
    table = readme.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]   # past the |---| line
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table]
    assert rows == [[f"`{job.name}`", job.what, "yes" if job.in_chain else "no"] for job in job_registry.JOBS]
    # And the commands that start the whole chain start exactly it.
    assert re.search(r"for job in ([\w ]+); do", readme).group(1).split() == job_registry.CHAIN


def test_run_names_an_unknown_job_before_starting_any(capsys, monkeypatch):
    from stormwatch import cli

    started = []
    real = cli.importlib.import_module
    monkeypatch.setattr(cli.importlib, "import_module",
                        lambda name, *a: started.append(name) if name.startswith("jobs.") else real(name, *a))
    assert cli.main(["run", "spans", "no_such_job"]) == 1
    assert "no job 'no_such_job'" in capsys.readouterr().err
    assert started == []


def test_one_job_graph_gives_each_job_its_own_table_environment_on_one_execution_environment():
    from stormwatch.config import load
    from stormwatch.flink_env import one_job_graph, shared_job_graph, stream_table_environment

    config = load(PROJECT_ROOT / "tests" / "stormwatch-test.toml")
    assert not shared_job_graph()
    with one_job_graph(config, "stormwatch-two") as env:
        assert shared_job_graph()
        first, second = (stream_table_environment(config, f"stormwatch-{n}") for n in ("a", "b"))
        assert first is not second
        first.execute_sql("CREATE TEMPORARY VIEW v AS SELECT 1 AS x")
        second.execute_sql("CREATE TEMPORARY VIEW v AS SELECT 2 AS x")  # no clash: each its own catalog
        with pytest.raises(ValueError, match="start fresh"):
            stream_table_environment(config, "stormwatch-c", restore_from="file:///tmp/savepoint")
    assert not shared_job_graph()
