import json

import pytest

from stormwatch.decisions import decision_id, encode, envelope

ENTITY = {"kind": "service", "key": "service:a", "service": "a"}


def test_decision_id_is_stable_and_depends_on_every_part():
    base = decision_id("service:a", "breaker", 30_000, "v1")
    assert base == decision_id("service:a", "breaker", 30_000, "v1") and len(base) == 32
    assert len({base, decision_id("service:b", "breaker", 30_000, "v1"), decision_id("service:a", "health", 30_000, "v1"),
                decision_id("service:a", "breaker", 40_000, "v1"), decision_id("service:a", "breaker", 30_000, "v2")}) == 5


def test_envelope_carries_the_body_beside_the_common_fields():
    d = envelope(ENTITY, "breaker", 3, 0, 30_000, "v1", {"state": "OPEN"})
    assert d["sequence"] == 3 and d["state"] == "OPEN" and d["entity"] == ENTITY
    assert d["decision_id"] == decision_id("service:a", "breaker", 30_000, "v1")


def test_encode_is_canonical():
    a = encode({"b": 0.1 + 0.2, "a": [1.0000000001, (2, 3)], "c": {"z": 1, "y": None}})
    assert a == '{"a":[1.0,[2,3]],"b":0.3,"c":{"y":null,"z":1}}'
    assert json.loads(a)["b"] == 0.3


def test_encode_refuses_nan():
    with pytest.raises(ValueError):
        encode({"x": float("nan")})
