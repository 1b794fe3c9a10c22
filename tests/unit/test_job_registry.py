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
