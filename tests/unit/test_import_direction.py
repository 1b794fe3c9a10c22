"""The packages build on each other in one direction, never back:

    connectors  (how bytes enter and leave: Kafka, OTLP)      imports none of the others
    stormwatch  (the product's logic and CLI)                 builds on connectors
    udfs        (the Python functions the SQL calls)          builds on stormwatch
    jobs        (Flink wiring)                                builds on all three
    reference   (the tests' and benchmarks' independent references) builds on none of connectors,
                jobs, udfs; reference/otlp.py on nothing of the project at all

Imports are read with ast, including those inside functions; `importlib.import_module("jobs." + name)`
in the CLI is how it runs a job, not a dependency of stormwatch on jobs' code."""

import ast

import pytest

from stormwatch.config import PROJECT_ROOT

PACKAGES = ("connectors", "stormwatch", "udfs", "jobs", "reference", "tests")
MAY_NOT_IMPORT = {
    "connectors": {"stormwatch", "udfs", "jobs", "reference", "tests"},
    "stormwatch": {"udfs", "jobs", "reference", "tests"},
    "udfs": {"jobs", "reference", "tests"},
    "jobs": {"reference", "tests"},
    "reference": {"connectors", "udfs", "jobs", "tests"},
}


def imported_packages(path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out & set(PACKAGES)


@pytest.mark.parametrize("package", sorted(MAY_NOT_IMPORT))
def test_no_package_imports_upwards(package):
    wrong = {str(path.relative_to(PROJECT_ROOT)): sorted(imported_packages(path) & MAY_NOT_IMPORT[package])
             for path in sorted((PROJECT_ROOT / package).rglob("*.py"))}
    assert {path: packages for path, packages in wrong.items() if packages} == {}


def test_the_otlp_reference_is_independent_of_the_product():
    assert imported_packages(PROJECT_ROOT / "reference" / "otlp.py") == set()
