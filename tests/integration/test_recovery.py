"""Exactly-once through failures, on the standalone cluster as users deploy it: the health job's
decisions, made while its TaskManager is killed, while it is stopped with a savepoint and started from
it, and while the broker is down, are exactly those of an undisturbed run over the same spans. None is
lost (sinks commit with checkpoints; state and offsets come back from them), none is there twice
(what a failed attempt wrote is aborted, and every reader reads committed records only)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable

import pytest

from connectors.kafka import consumer, producer
from connectors.otlp import encode_json
from stormwatch.catalog import TOPIC_ROLES
from stormwatch.replay import produce
from stormwatch.runtime.processes import wait_until
from stormwatch.traffic.faults import FaultWindow, Params
from stormwatch.traffic.generator import TraceGenerator
from stormwatch.traffic.otlp import to_export_requests
from tests.conftest import new_topics, run_bounded, stormwatch

pytestmark = pytest.mark.integration

# What the health job writes, compared record for record with the undisturbed run.
OUTPUTS = ("health", "breaker_decisions", "retry_decisions", "storm_decisions", "instance_windows", "dead_letters")
CHUNKS = 6


def records(config, topic: str, quiet_s: float = 5.0) -> list[tuple[int, bytes, bytes]]:
    """Every committed record of `topic` as (partition, key, value), in offset order per partition."""
    client = consumer(config, topic, consumer_timeout_ms=int(quiet_s * 1000))
    try:
        return [(m.partition, m.key, m.value) for m in client]
    finally:
        client.close()


@pytest.fixture(scope="module")
def staged(config, kafka, flink_cluster):
    """A storm's span figures on stormwatch_span_instances (by the span path), and the undisturbed health
    run's outputs."""
    names = new_topics(config, TOPIC_ROLES)
    fault = FaultWindow(service="llm-inference", start_s=100, end_s=180, latency_factor=4.0, error_rate=0.9)
    generator = TraceGenerator(seed=23, faults=[fault], params=Params(retries={"orchestrator": 2}))
    spans = sorted((s for t in generator.generate(5.0, 360) for s in t), key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode_json(r) for r in to_export_requests(spans)], partition=0)
    run_bounded(names, ["spans", "health"])
    reference = {role: Counter((k, v) for _, k, v in records(config, names[role])) for role in OUTPUTS}
    assert sum(reference["breaker_decisions"].values()) > 0
    # What health reads of the span path, in the order the span path wrote it: per-instance figures
    # bucket by bucket and the edges window by window, across both partitions (a consumer hands out one
    # partition's records before the other's). Fed so, no input runs ahead of another.
    fed = [("span_instances", r, json.loads(r[2])["bucket_end_ms"]) for r in records(config, names["span_instances"])]
    fed += [("edges", r, json.loads(r[2])["window_end_ms"]) for r in records(config, names["edges"])]
    fed.sort(key=lambda f: f[2])
    return {"names": names, "spans": [(role, r) for role, r, _ in fed], "reference": reference}


class LiveRun:
    """The health job streaming on the cluster over topics of its own, fed the staged spans a chunk at
    a time, with `disrupt` called between chunks."""

    def __init__(self, config, cluster, staged):
        self.config, self.cluster = config, cluster
        self.names = {**staged["names"], **new_topics(config, ("span_instances", "edges", *OUTPUTS))}
        self.args = ["--group-id", f"health-{self.names['span_instances']}",
                     *[f"--topic={role}={name}" for role, name in self.names.items()]]
        self.job_id = self.submit()

    def submit(self, *extra: str) -> str:
        result = stormwatch("run", "health", "--cluster", "--", *self.args, *extra)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout.split()[-1]

    def state(self) -> str:
        return next(j["state"] for j in self.cluster.jobs() if j["jid"] == self.job_id)

    def await_checkpoint(self) -> None:
        """Until the job runs and has completed a checkpoint since now: it made progress to lose."""
        before = self.cluster.checkpoints(self.job_id)["counts"]["completed"]
        wait_until(lambda: self.state() == "RUNNING" and self.cluster.checkpoints(self.job_id)["counts"]["completed"] > before,
                   180, f"a new checkpoint of job {self.job_id}", interval=1.0)

    def feed(self, spans: list[tuple[str, tuple[int, bytes, bytes]]], disrupt: Callable[[int], None]) -> None:
        client = producer(self.config)
        try:
            size = -(-len(spans) // CHUNKS)
            for chunk in range(CHUNKS):
                for role, (partition, key, value) in spans[chunk * size:(chunk + 1) * size]:
                    client.send(self.names[role], key=key, value=value, partition=partition)
                client.flush()
                if chunk < CHUNKS - 1:
                    disrupt(chunk)
            # A bucket an hour later on each partition of the per-instance figures moves the watermark past
            # every health window of the storm (the undisturbed run closed them at the end of its bounded
            # input). Edges need none: they are windows already, each decided as it comes, and one an hour
            # later would be a decision the undisturbed run never made.
            hour = 3600 * 1000
            mine = [r for role, r in spans if role == "span_instances"]
            for partition in sorted({p for p, _, _ in mine}):
                partition_key, last = next((k, json.loads(v)) for p, k, v in reversed(mine) if p == partition)
                flush = {**last, "example_trace_id": "f" * 32,
                         **{f: last[f] + hour for f in ("bucket_start_ms", "bucket_end_ms")}}
                client.send(self.names["span_instances"], key=partition_key, value=json.dumps(flush).encode(),
                            partition=partition)
            client.flush()
        finally:
            client.close()

    def outputs(self, reference: dict[str, Counter]) -> dict[str, Counter]:
        """The outputs once they are as many as the reference's (or 5 min passed), and what came after."""
        deadline = time.monotonic() + 300
        out: dict[str, Counter] = {}
        for role in OUTPUTS:
            seen: list = []
            while True:
                seen = records(self.config, self.names[role])
                if len(seen) >= sum(reference[role].values()) or time.monotonic() > deadline:
                    break
                time.sleep(5)
            out[role] = Counter((k, v) for _, k, v in seen)
        return out

    def cancel(self) -> None:
        self.cluster.cancel(self.job_id)


def assert_same_as_undisturbed(run: LiveRun, staged) -> None:
    outputs = run.outputs(staged["reference"])
    for role in OUTPUTS:
        missing, extra = staged["reference"][role] - outputs[role], outputs[role] - staged["reference"][role]
        assert not missing and not extra, (
            f"{role}: {sum(missing.values())} records of the undisturbed run missing, {sum(extra.values())} "
            f"not in it; first missing {[v[:300] for _, v in list(missing)[:3]]}, "
            f"first extra {[v[:300] for _, v in list(extra)[:3]]}")
    decisions = [json.loads(v) for role in ("health", "breaker_decisions", "retry_decisions")
                 for (_, v), n in outputs[role].items() for _ in range(n)]
    assert len({d["decision_id"] for d in decisions}) == len(decisions)


def test_decisions_are_complete_and_once_across_taskmanager_kills_and_a_savepoint_restart(config, flink_cluster,
                                                                                         staged):
    run = LiveRun(config, flink_cluster, staged)

    def disrupt(chunk: int) -> None:
        run.await_checkpoint()
        if chunk == 2:
            # Stopped with a savepoint and started again from it: a redeployment.
            location = flink_cluster.stop_with_savepoint(run.job_id)
            run.job_id = run.submit("--from-savepoint", location)
            return
        for pid in flink_cluster.taskmanager_pids():
            os.kill(pid, signal.SIGKILL)
        flink_cluster.start_taskmanager()

    try:
        run.feed(staged["spans"], disrupt)
        assert_same_as_undisturbed(run, staged)
        assert flink_cluster.checkpoints(run.job_id)["counts"]["restored"] >= 2
    finally:
        run.cancel()


def test_decisions_are_complete_and_once_when_the_broker_stops_and_comes_back(config, kafka, flink_cluster, staged):
    run = LiveRun(config, flink_cluster, staged)

    def disrupt(chunk: int) -> None:
        if chunk in (1, 3):
            run.await_checkpoint()
            kafka.stop()
            time.sleep(10)
            kafka.start()

    try:
        run.feed(staged["spans"], disrupt)
        assert_same_as_undisturbed(run, staged)
    finally:
        run.cancel()
