"""Health, breakers and retry gates through the real Kafka and Flink: spans ->
health on a generated retry storm and on the TrainTicket data."""

from __future__ import annotations

import json
import uuid

import pytest

from connectors.kafka import create_topics
from connectors.otlp import encode_json
from reference.otlp import SHARED_DATA, otlp_json_lines, spans_of_file
from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import load as load_policy
from stormwatch.policy_signing import SigningKey, sign
from stormwatch.replay import collector_batches, produce, send
from stormwatch.traffic.faults import FaultWindow, Params
from stormwatch.traffic.generator import DEFAULT_START_UNIX_NANO, TraceGenerator
from stormwatch.traffic.otlp import to_export_requests
from tests.conftest import SPAN_PATH_ROLES, TEST_CONFIG, read_topic, run_bounded, sql_client, stormwatch
from tests.schemas import assert_valid

pytestmark = pytest.mark.integration

# The span path's topics too (its suspects among them): none of its output may land in a default topic.
ROLES = (*SPAN_PATH_ROLES, "metrics", "instance_windows", "health", "breaker_decisions", "retry_decisions",
         "storm_decisions", "policy", "otlp_metrics")
POLICY = load_policy(PROJECT_ROOT / "config" / "policy.toml")
SLIDE_MS = POLICY.health.window_slide_seconds * 1000
FAULT_START_S, FAULT_END_S, END_S = 120, 210, 1200


def run_chain(config, names) -> None:
    run_bounded(names, ["spans", "health"])


def by_entity(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(r["entity"]["key"], []).append(r)
    for items in out.values():
        items.sort(key=lambda r: r["sequence"])
    return out


@pytest.fixture(scope="module")
def storm(config, kafka, flink_cluster):
    """A storm: llm-inference fails and slows down, the orchestrator retries every failed call twice.
    Module-scoped, so its topics are made here rather than by the per-test `topics_for`."""
    suffix = uuid.uuid4().hex[:8]
    names = {role: f"test_{role}_{suffix}" for role in ROLES}
    create_topics(config, {name: {"partitions": 2} for name in names.values()})
    fault = FaultWindow(service="llm-inference", start_s=FAULT_START_S, end_s=FAULT_END_S,
                        latency_factor=4.0, error_rate=0.9)
    generator = TraceGenerator(seed=11, faults=[fault], params=Params(retries={"orchestrator": 2}))
    spans = sorted((s for t in generator.generate(5.0, END_S) for s in t), key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode_json(r) for r in to_export_requests(spans)], partition=0)
    run_chain(config, names)
    read = {role: read_topic(config, names[role], 1, timeout=60)
            for role in ("health", "breaker_decisions", "retry_decisions", "storm_decisions")}
    return {"names": names, **read}


def test_the_storm_opens_the_breaker_within_two_slides(storm):
    assert_valid("stormwatch_breaker_decisions", storm["breaker_decisions"])
    breaker = by_entity(storm["breaker_decisions"])["service:llm-inference"]
    fault_start_ms = DEFAULT_START_UNIX_NANO // 10**6 + FAULT_START_S * 1000
    opened = [d for d in breaker if d["state"] == "OPEN"]
    assert opened, [d["state"] for d in breaker]
    assert fault_start_ms < opened[0]["window_end_ms"] <= fault_start_ms + 2 * SLIDE_MS
    assert opened[0]["previous_state"] == "CLOSED"
    assert [d["sequence"] for d in breaker] == list(range(1, len(breaker) + 1))


def test_retry_gates_tighten_in_the_storm(storm):
    assert_valid("stormwatch_retry_decisions", storm["retry_decisions"])
    gates = by_entity(storm["retry_decisions"])["service:llm-inference"]
    fault_start_ms = DEFAULT_START_UNIX_NANO // 10**6 + FAULT_START_S * 1000
    before = [g for g in gates if g["window_end_ms"] <= fault_start_ms]
    during = [g for g in gates if fault_start_ms < g["window_end_ms"] <= fault_start_ms + 60_000]
    assert before and before[-1]["max_retries"] > 0
    assert during and min(g["max_retries"] for g in during) == 0


def test_the_retrying_edge_is_in_a_retry_storm_while_its_callee_fails(storm):
    assert_valid("stormwatch_storm_decisions", storm["storm_decisions"])
    decisions = by_entity(storm["storm_decisions"])["edge:orchestrator->llm-inference"]
    fault_start_ms = DEFAULT_START_UNIX_NANO // 10**6 + FAULT_START_S * 1000
    fault_end_ms = DEFAULT_START_UNIX_NANO // 10**6 + FAULT_END_S * 1000
    assert [d["reason_code"] for d in decisions][:2] == ["STORM_STARTED", "STORM_ENDED"], decisions
    started, ended = decisions[0], decisions[1]
    assert fault_start_ms < started["window_end_ms"] <= fault_start_ms + 3 * SLIDE_MS
    assert started["inputs"]["amplification"] >= POLICY.storm.start_amplification
    assert ended["window_end_ms"] > fault_end_ms and ended["started_ms"] == started["window_end_ms"]
    # While it lasted, the orchestrator's gate towards llm-inference named the storm or its open breaker.
    gates = [g for g in by_entity(storm["retry_decisions"])["edge:orchestrator->llm-inference"]
             if started["window_end_ms"] <= g["window_end_ms"] < ended["window_end_ms"]]
    assert gates and all(g["reason_code"] == "RETRY_STORM" or g["reason_code"].startswith("BREAKER_") for g in gates)
    assert all(g["max_retries"] <= 1 for g in gates)


def test_recovery_ramps_five_percent_per_thirty_seconds_back_to_closed(storm):
    breaker = by_entity(storm["breaker_decisions"])["service:llm-inference"]
    fault_end_ms = DEFAULT_START_UNIX_NANO // 10**6 + FAULT_END_S * 1000
    after = [d for d in breaker if d["window_end_ms"] > fault_end_ms]
    states = [d["state"] for d in after]
    assert "HALF_OPEN" in states and states[-1] == "CLOSED", states
    ramp = [d for d in after if d["state"] == "GRADUAL_RECOVERY"]
    shares = [round(d["admitted_share"], 4) for d in ramp]
    assert shares == sorted(shares) and shares[0] == 0.05 and shares[-1] == 0.95, shares
    assert all(b["window_end_ms"] - a["window_end_ms"] >= POLICY.breaker.ramp_step_seconds * 1000
               for a, b in zip(ramp, ramp[1:]))


def test_health_records_score_every_window_or_say_insufficient_data(storm):
    assert_valid("stormwatch_health", storm["health"])
    statuses = {r["status"] for r in storm["health"]}
    assert "OK" in statuses
    for r in storm["health"]:
        assert (r["score"] is None) == (r["status"] == "INSUFFICIENT_DATA")


@pytest.fixture(scope="module")
def trainticket(config, kafka, flink_cluster):
    """Every labelled TrainTicket file through the chain: {label file: (label, service health records
    inside the file's time span, breaker decisions inside it, retry decisions inside it)}."""
    labels = sorted(json.loads((SHARED_DATA / "labels.json").read_text()), key=lambda l: l["file"])
    suffix = uuid.uuid4().hex[:8]
    names = {role: f"test_{role}_{suffix}" for role in ROLES}
    create_topics(config, {name: {"partitions": 2} for name in names.values()})
    messages = [m for label in labels for m in collector_batches(otlp_json_lines(SHARED_DATA / label["file"]))]
    produce(config, names["source"], messages, partition=0)
    run_chain(config, names)
    health = [r for r in read_topic(config, names["health"], 1, timeout=60) if r["entity"]["kind"] == "service"]
    breakers = read_topic(config, names["breaker_decisions"], 0, timeout=20)
    retries = read_topic(config, names["retry_decisions"], 1, timeout=20)
    out = {}
    for label in labels:
        spans = spans_of_file(SHARED_DATA / label["file"])
        begin_ms, end_ms = min(s.start for s in spans) // 10**6, max(s.end for s in spans) // 10**6

        def inside(records, begin_ms=begin_ms, end_ms=end_ms):
            return [r for r in records if begin_ms <= r["window_start_ms"] and r["window_end_ms"] <= end_ms]

        out[label["file"]] = (label, inside(health), inside(breakers), inside(retries))
    return out


def test_current_health_and_breakers_answer_through_the_sql_client(storm, tmp_path):
    answer = sql_client(storm["names"], tmp_path,
                        "SELECT entity, state, max_retries FROM current_breakers WHERE entity = 'service:llm-inference';\n"
                        "SELECT entity, status FROM current_health WHERE entity = 'service:llm-inference';\n")
    assert answer.returncode == 0, answer.stdout[-3000:]
    newest = by_entity(storm["breaker_decisions"])["service:llm-inference"][-1]
    assert newest["state"] == "CLOSED"
    assert "| service:llm-inference |" in answer.stdout and "CLOSED" in answer.stdout, answer.stdout[-3000:]
    assert answer.stdout.count("1 row in set") == 2, answer.stdout[-3000:]


def test_trainticket_baseline_opens_no_breaker(trainticket):
    ((label, health, breakers, retries),) = [v for v in trainticket.values() if v[0].get("fault_free")]
    # Breaker decisions are published on a change only, so an empty list proves nothing by itself.
    # First: the breakers were stepped with windows that could open them (a score and at least
    # breaker.min_calls calls), many of them, and the retry gates (each entity's first is always
    # published) report the breaker state they were computed with.
    judged = [r for r in health if r["score"] is not None and r["inputs"]["calls"] >= POLICY.breaker.min_calls]
    assert len(judged) >= 20 and len({r["entity"]["service"] for r in judged}) >= 5, len(judged)
    assert retries and {d["breaker_state"] for d in retries} == {"CLOSED"}, {d["breaker_state"] for d in retries}
    assert not [b for b in breakers if b["state"] in ("OPEN", "FORCED_OPEN")]


def test_a_published_policy_is_stamped_on_decisions_and_an_invalid_one_is_dead_lettered(config, topics_for,
                                                                                          flink_cluster, tmp_path):
    names = topics_for(ROLES)
    newer = tmp_path / "newer.toml"
    newer.write_text((PROJECT_ROOT / "config" / "policy.toml").read_text().replace(
        f'version = "{POLICY.version}"', 'version = "test-newer"', 1))
    invalid = tmp_path / "invalid.toml"
    invalid.write_text(newer.read_text().replace("window_size_seconds = 30", "window_size_seconds = 60", 1))
    for path in (newer, invalid):
        result = stormwatch("policy", "publish", str(path), f"--topic=policy={names['policy']}")
        assert result.returncode == 0, result.stderr
    generator = TraceGenerator(seed=3)
    spans = sorted((s for t in generator.generate(5.0, 240) for s in t), key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode_json(r) for r in to_export_requests(spans)], partition=0)
    run_chain(config, names)

    health = read_topic(config, names["health"], 1, timeout=60)
    newest = max(r["window_end_ms"] for r in health)
    # The broadcast policy and the windows are two inputs of a bounded replay: the first windows may be
    # decided before the policy arrives, never the last ones.
    assert {r["policy_version"] for r in health if r["window_end_ms"] == newest} == {"test-newer"}
    rejected = [d for d in read_topic(config, names["dead_letters"], 1, timeout=30) if d["source_topic"] == names["policy"]]
    assert len(rejected) == 1 and "policy rejected" in rejected[0]["reason"], rejected
    assert "window" in rejected[0]["reason"]


def test_with_a_signing_key_only_a_signed_newer_policy_applies(config, topics_for, flink_cluster, tmp_path):
    """Who may change the policy, through the real job: with a key configured, the signed policy
    applies; an unsigned one, one signed with another key and a replay of an older version are each
    dead-lettered once with the reason, and the signed one stays in force."""
    names = topics_for(ROLES)
    key = SigningKey(uuid.uuid4().hex.encode() * 2, "test")
    (tmp_path / "policy.key").write_bytes(key.secret)
    signed_config = tmp_path / "signed.toml"
    signed_config.write_text(f"base = {str(TEST_CONFIG)!r}\n[pipeline.policy]\n"
                             f"signing_key_file = {str(tmp_path / 'policy.key')!r}\n")
    newer = tmp_path / "newer.toml"
    newer.write_text((PROJECT_ROOT / "config" / "policy.toml").read_text().replace(
        f'version = "{POLICY.version}"', 'version = "2026-12-08.1"', 1))
    result = stormwatch("policy", "publish", str(newer), f"--topic=policy={names['policy']}", config=signed_config)
    assert result.returncode == 0 and "signed with the key from file" in result.stdout, result.stderr
    other = SigningKey(b"o" * 32, "another key")
    refused = [{**POLICY.raw, "version": "2026-12-09.1"},
               sign({**POLICY.raw, "version": "2026-12-09.2"}, other),
               sign({**POLICY.raw, "version": "2026-12-07.9"}, key)]
    send(config, [(names["policy"], b"default", json.dumps(doc).encode()) for doc in refused], {names["policy"]},
         total=len(refused))
    generator = TraceGenerator(seed=3)
    spans = sorted((s for t in generator.generate(5.0, 240) for s in t), key=lambda s: s.end_unix_nano)
    produce(config, names["source"], [encode_json(r) for r in to_export_requests(spans)], partition=0)
    run_bounded(names, ["spans", "health"], config=signed_config)

    health = read_topic(config, names["health"], 1, timeout=60)
    newest = max(r["window_end_ms"] for r in health)
    assert {r["policy_version"] for r in health if r["window_end_ms"] == newest} == {"2026-12-08.1"}
    letters = sorted((d for d in read_topic(config, names["dead_letters"], 3, timeout=30)
                      if d["source_topic"] == names["policy"]), key=lambda d: d["source_offset"])
    prefix = "policy rejected, the previous one stays in force: "
    assert [d["reason"][:len(prefix) + 9] for d in letters] == [prefix + "unsigned:", prefix + "signature",
                                                                 prefix + "replay: v"], letters
    assert "older than '2026-12-08.1'" in letters[2]["reason"]
    assert not any(key.secret.decode() in d["reason"] for d in letters)
