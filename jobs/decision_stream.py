"""What the decision jobs (health, scaling) share: per-entity observations keyed by entity, the policy
as broadcast state from the compacted policy topic, and decisions routed to their topics.

Each observation is one window's aggregate for one entity (a few records per service per slide), so
the per-entity logic is plain Python (stormwatch/entity_control.py, stormwatch/scaling_control.py) called
once per record; its state is one pickled value per entity in Flink state, checkpointed with the job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from pyflink.common import Row, Time, Types
from pyflink.datastream import DataStream
from pyflink.datastream.functions import KeyedBroadcastProcessFunction, KeyedProcessFunction
from pyflink.datastream.state import MapStateDescriptor, StateTtlConfig, ValueStateDescriptor
from pyflink.table import StreamTableEnvironment

from jobs.common import Inserts, source_options, topics_and_group
from jobs.streams import DEAD_LETTERS
from stormwatch import catalog
from stormwatch.config import Config
from stormwatch.decisions import encode
from stormwatch.policy import Policy, apply_update, default_file, load, warning_reason, warnings
from stormwatch.policy_signing import UNAUTHENTICATED, SigningKey, apply_signed_update, signing_key
from stormwatch.sqlfiles import load_statements

LOG = logging.getLogger(__name__)
# Rows this module makes are built with field names: the next operator in a chain gets the Row object
# itself, not one read back with the names of its type, and reads it by name.
OBSERVATION = Types.ROW_NAMED(["entity_key", "payload"], [Types.STRING(), Types.STRING()])
# A decision on its way to a topic: which output (a key of the job's sinks), the Kafka key, the bytes.
OUTPUT = Types.ROW_NAMED(["output", "entity_key", "record"], [Types.STRING(), Types.STRING(), Types.STRING()])
POLICY_RECORD = Types.ROW_NAMED(["name", "document", "kafka_partition", "kafka_offset"],
                                [Types.STRING(), Types.STRING(), Types.INT(), Types.LONG()])
POLICY_STATE = MapStateDescriptor("policy", Types.STRING(), Types.STRING())

# step(previous entity state or None, observation, policy) -> (new state, [(output, entity key, record)])
Step = Callable[[object, dict, Policy], tuple[object, list[tuple[str, str, str]]]]


class PolicyGate(KeyedProcessFunction):
    """Keyed by policy name: the one place a policy record is judged. An accepted document goes on to
    every parallel instance of the decisions as broadcast state; a rejected one goes to the dead
    letters once, with the reason, and the policy in force stays. An accepted one with risks
    (stormwatch/policy.py warnings) applies, and its warnings are logged and go to the dead letters
    once, as one record whose reason begins `policy accepted with warnings`.

    With a signing key (stormwatch/policy_signing.py) an unsigned or wrongly signed document, or one
    older than the policy in force, is rejected the same way. The key travels with the job (pickled in
    its graph); it is in no log or dead letter."""

    def __init__(self, job: str, default: Policy, policy_topic: str, key: SigningKey | None = None):
        self.job = job
        self.default = default
        self.policy_topic = policy_topic
        self.key = key

    def open(self, runtime_context):
        self.accepted = runtime_context.get_state(ValueStateDescriptor("accepted", Types.STRING()))

    def process_element(self, value, ctx):
        document = self.accepted.value()
        # The one accepted is re-read as it was accepted: its signature was checked then.
        current = self.default if document is None else apply_update(self.default, document)[0]
        new, error = apply_signed_update(current, value.document, self.key)
        if error is None:
            self.accepted.update(value.document)
            yield value
            risks = warnings(new)
            if risks:
                reason = warning_reason(risks)
                LOG.warning("%s: policy %r version %r from %s[%s]@%s: %s", self.job, new.name, new.version,
                            self.policy_topic, value.kafka_partition, value.kafka_offset, reason)
                yield DEAD_LETTERS, Row(self.policy_topic, value.kafka_partition, value.kafka_offset, reason,
                                        value.document, self.job)
        else:
            yield DEAD_LETTERS, Row(self.policy_topic, value.kafka_partition, value.kafka_offset,
                                    f"policy rejected, the previous one stays in force: {error}",
                                    value.document, self.job)


class PolicyControlled(KeyedBroadcastProcessFunction):
    """Runs `step` for every observation of an entity under the policy in force when it arrives."""

    def __init__(self, default: Policy, step: Step, state_ttl_days: int):
        self.default = default
        self.step = step
        self.state_ttl_days = state_ttl_days

    def open(self, runtime_context):
        descriptor = ValueStateDescriptor("entity", Types.PICKLED_BYTE_ARRAY())
        # An entity that stops reporting (a removed service, a vanished edge) is forgotten. Cleanup is
        # named explicitly: PyFlink's default adds a RocksDB compaction-filter strategy whose Duration
        # needs a Py4J gateway, which a TaskManager of a standalone cluster does not have.
        descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.days(self.state_ttl_days))
                                       .disable_cleanup_in_background()
                                       .cleanup_incrementally(10, False)
                                       .build())
        self.entity = runtime_context.get_state(descriptor)
        self.parsed: tuple[str, Policy] | None = None

    def _policy(self, document: str | None) -> Policy:
        if document is None:
            return self.default
        if self.parsed is None or self.parsed[0] != document:
            # Accepted by PolicyGate already: parsing it again cannot fail.
            self.parsed = (document, apply_update(self.default, document)[0])
        return self.parsed[1]

    def process_element(self, value, ctx):
        policy = self._policy(ctx.get_broadcast_state(POLICY_STATE).get(self.default.name))
        state, outputs = self.step(self.entity.value(), json.loads(value.payload), policy)
        self.entity.update(state)
        for output, key, record in outputs:
            yield Row(output=output, entity_key=key, record=record)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(POLICY_STATE).put(value.name, value.document)
        return []


def published(decisions: list[dict]) -> list[tuple[str, str, str]]:
    """Enveloped decisions as `Step` returns them: (decision type, entity key, canonical JSON record)."""
    return [(d["decision_type"], d["entity"]["key"], encode(d)) for d in decisions]


def job_inputs(args, config: Config, job: str, inputs: dict[str, str]) -> tuple[dict, str, Policy, dict]:
    """(topic names, consumer group, default policy, SQL variables) of a decision job reading the
    tables of `inputs` (topic role -> table), each role with its own consumer group."""
    names, group = topics_and_group(args, config, job)
    read_with = {role: source_options(args, f"{group}-{role}") for role in inputs}
    # The policy topic is compacted state: always read whole.
    read_with["policy"] = {**read_with["policy"], "scan.startup.mode": "earliest-offset"}
    default = load(default_file(config))
    for line in warnings(default):
        LOG.warning("%s: default policy %s: %s", job, default_file(config), line)
    return names, group, default, catalog.variables(config, names, source_options(args, group), read_with=read_with)


def policy_key(config: Config, job: str) -> SigningKey | None:
    """The key policy records must be signed with ([pipeline.policy]); without one, a warning that the
    policy topic is unauthenticated, logged once when the job is built."""
    key = signing_key(config)
    if key is None:
        LOG.warning("%s: %s", job, UNAUTHENTICATED)
    else:
        LOG.info("%s: policy records must be signed with the key from %s", job, key.source)
    return key


def observations(rows: DataStream, entity_key: Callable[[dict], str]) -> DataStream:
    """Table rows as (entity key, JSON payload) observations."""
    return rows.map(lambda r: Row(entity_key=entity_key(r.as_dict()), payload=json.dumps(r.as_dict(), default=str)),
                    output_type=OBSERVATION)


def control(t_env: StreamTableEnvironment, observed: DataStream, job: str, default: Policy, step: Step,
            policy_topic: str, state_ttl_days: int, sinks: dict[str, str], variables: dict, inserts: Inserts,
            signing_key: SigningKey | None = None) -> None:
    """Key `observed` by entity, run `step` under the policy (the default, or the newest accepted
    record of the policy topic, broadcast), and add an INSERT per output into the raw sink of its
    topic (`sinks`: output -> topic role), dead letters included. With `signing_key`, only policy
    records signed with it apply (PolicyGate)."""
    records = t_env.to_data_stream(t_env.from_path("stormwatch_policy")).map(
        lambda r: Row(name=r["name"], document=r["document"], kafka_partition=r["kafka_partition"],
                      kafka_offset=r["kafka_offset"]),
        output_type=POLICY_RECORD)
    # Records of other policies (other deployments sharing the topic) are not this job's.
    judged = (records.filter(lambda r, name=default.name: r.name == name)
              .key_by(lambda r: r.name, key_type=Types.STRING())
              .process(PolicyGate(job, default, policy_topic, signing_key), output_type=POLICY_RECORD))
    decided = (observed.key_by(lambda o: o.entity_key, key_type=Types.STRING())
               .connect(judged.broadcast(POLICY_STATE))
               .process(PolicyControlled(default, step, state_ttl_days), output_type=OUTPUT))
    for output, role in sinks.items():
        table = f"{role}_out"
        for statement in load_statements(["sinks/decision_sink"], {
                "sink_table": table, "sink_options": variables[f"{role}_options"]}):
            t_env.execute_sql(statement)
        rows = decided.filter(lambda r, wanted=output: r.output == wanted).map(
            lambda r: Row(entity_key=r.entity_key, record=r.record),
            output_type=Types.ROW_NAMED(["entity_key", "record"], [Types.STRING(), Types.STRING()]))
        inserts.table(table, t_env.from_data_stream(rows))
    inserts.table("stormwatch_dead_letters", t_env.from_data_stream(judged.get_side_output(DEAD_LETTERS)))
