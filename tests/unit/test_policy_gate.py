"""The policy gate of the decision jobs (jobs/decision_stream.py PolicyGate), called as Flink calls it:
a valid document goes on, a risky one goes on and its warnings go to the dead letters and the log, an
invalid one goes to the dead letters only."""

import json
import logging
import tomllib

from pyflink.common import Row

from jobs.decision_stream import PolicyGate
from jobs.streams import DEAD_LETTERS
from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import load
from tests.unit.flink_fakes import RuntimeContext

PATH = PROJECT_ROOT / "config" / "policy.toml"
DOC = tomllib.loads(PATH.read_text())
TOPIC = "stormwatch_policy"


def _gate() -> PolicyGate:
    gate = PolicyGate("scaling", load(PATH), TOPIC)
    gate.open(RuntimeContext())
    return gate


def _record(doc: dict, offset: int) -> Row:
    return Row(name=doc["name"], document=json.dumps(doc), kafka_partition=0, kafka_offset=offset)


def test_a_risky_policy_is_accepted_and_its_warnings_are_dead_lettered_and_logged(caplog):
    risky = {**DOC, "version": "risky", "retry": {**DOC["retry"], "jitter": "none"}}
    with caplog.at_level(logging.WARNING):
        out = list(_gate().process_element(_record(risky, 7), None))
    accepted, (tag, letter) = out
    assert accepted.document == json.dumps(risky)
    assert tag is DEAD_LETTERS
    assert (letter[0], letter[1], letter[2], letter[4], letter[5]) == (TOPIC, 0, 7, json.dumps(risky), "scaling")
    assert letter[3].startswith("policy accepted with warnings (backoff parameter sensitivity): retry.jitter = none")
    assert "retry.jitter = none" in caplog.text and "'risky'" in caplog.text


def test_a_policy_without_risks_goes_on_alone_and_an_invalid_one_is_rejected():
    gate = _gate()
    fine = {**DOC, "version": "fine"}
    assert [r.document for r in gate.process_element(_record(fine, 1), None)] == [json.dumps(fine)]
    broken = {**DOC, "version": "broken", "retry": {**DOC["retry"], "jitter": "sometimes"}}
    ((tag, letter),) = list(gate.process_element(_record(broken, 2), None))
    assert tag is DEAD_LETTERS and letter[3].startswith("policy rejected, the previous one stays in force: retry.jitter")
