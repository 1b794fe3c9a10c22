"""Every Flink job of the project, in one place: the CLI (`stormwatch run`), the demo and the benchmarks
read it; unit tests hold the README's job table, the files of jobs/, Docker Compose and the Kubernetes
manifests to it.

A job is the module jobs/<name>.py with a `main(argv)`; what it does is said once, here. `CHAIN` is
the whole pipeline in start order: what the demo, `docker compose up` and deploy/kubernetes run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stormwatch.config import PROJECT_ROOT, ConfigError

JOBS_DIR = PROJECT_ROOT / "jobs"


@dataclass(frozen=True)
class Job:
    name: str
    what: str          # one line: what it reads and what it publishes (the README's job table)
    in_chain: bool     # part of the whole pipeline the demo and the deployments run


JOBS: tuple[Job, ...] = (
    Job("spans", "the span path: otlp_spans → edges, service windows, error breaks, latency stages, per-instance "
                 "span figures, and in its own job graph the root-cause suspects, topology snapshots and edge events",
        True),
    Job("health", "the span path's per-instance figures and edges + instance metrics → instance windows, health "
                  "scores, circuit breakers, retry gates", True),
    Job("scaling", "instance windows + service health (with its breaker) → QPS–latency Pareto fronts and scaling decisions, "
                   "coordinated with each service's breaker", True),
    Job("suspects", "re-ranks root-cause suspects from the span path's topics (a replay, another policy)", False),
    Job("flatten_spans", "optional export: one row per valid span to stormwatch_spans", False),
)
BY_NAME = {job.name: job for job in JOBS}
CHAIN = [job.name for job in JOBS if job.in_chain]


def names() -> list[str]:
    return sorted(BY_NAME)


def path(name: str) -> Path:
    """The job's program (what `flink run --python` is given); ConfigError for an unknown name."""
    if name not in BY_NAME:
        raise ConfigError(f"no job {name!r}; jobs: {', '.join(names())}")
    return JOBS_DIR / f"{name}.py"
