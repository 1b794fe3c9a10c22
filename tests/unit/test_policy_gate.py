"""The policy gate of the decision jobs (jobs/decision_stream.py PolicyGate), called as Flink calls it:
a valid document goes on, a risky one goes on and its warnings go to the dead letters and the log, an
invalid one goes to the dead letters only."""

import json
import logging
import tomllib

import pytest
from pyflink.common import Row

from jobs.decision_stream import PolicyGate
from jobs.streams import DEAD_LETTERS
from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import load
from stormwatch.policy_signing import SigningKey, sign
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


# Who may change the policy (issue 24 item 1): with a signing key, only signed, newer documents apply.
KEY = SigningKey(b"k" * 32, "test")


def _signed_gate() -> PolicyGate:
    gate = PolicyGate("health", load(PATH), TOPIC, KEY)
    gate.open(RuntimeContext())
    return gate


@pytest.mark.parametrize("doc, reason", [
    ({**DOC, "version": "2026-12-08.1"}, "unsigned: the document has no `signature` field"),
    (sign({**DOC, "version": "2026-12-08.1"}, SigningKey(b"o" * 32, "other")), "signature: does not match"),
    ({**sign({**DOC, "version": "2026-12-08.1"}, KEY), "version": "2026-12-09.1"}, "signature: does not match"),
    (sign({**DOC, "version": "2026-12-06.1"}, KEY), "replay: version '2026-12-06.1' is older"),
])
def test_with_a_key_a_refused_policy_is_dead_lettered_once_with_the_reason_and_the_previous_stays(doc, reason):
    gate = _signed_gate()
    newer = sign({**DOC, "version": "2026-12-07.5"}, KEY)
    assert [r.document for r in gate.process_element(_record(newer, 1), None)] == [json.dumps(newer)]
    ((tag, letter),) = list(gate.process_element(_record(doc, 2), None))
    assert tag is DEAD_LETTERS and letter[2] == 2 and letter[4] == json.dumps(doc)
    assert letter[3].startswith("policy rejected, the previous one stays in force: " + reason)
    assert "k" * 32 not in letter[3]
    # The previous one stays: a policy older than it is a replay, one newer than it applies.
    ((_, replayed),) = list(gate.process_element(_record(sign({**DOC, "version": "2026-12-07.4"}, KEY), 3), None))
    assert "older than '2026-12-07.5'" in replayed[3]
    next_one = sign({**DOC, "version": "2026-12-07.6"}, KEY)
    assert [r.document for r in gate.process_element(_record(next_one, 4), None)] == [json.dumps(next_one)]


def test_without_a_key_an_unsigned_policy_still_applies():
    unsigned = {**DOC, "version": "2000-01-01.1"}
    assert [r.document for r in _gate().process_element(_record(unsigned, 1), None)] == [json.dumps(unsigned)]
