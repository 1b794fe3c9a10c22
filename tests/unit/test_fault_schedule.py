"""Fault schedules (stormwatch/traffic/schedule.py): presets, TOML and JSON files, and the errors of bad ones."""

from __future__ import annotations

import json

import pytest

from stormwatch.traffic.faults import FaultWindow, LoadShape
from stormwatch.traffic.schedule import PRESETS_DIR, Schedule, load_schedule, parse_schedule, preset_names

TOML = """
description = "an error burst"
duration_s = 200
load = [[0, 1.0], [60, 2.0]]

[retries]
orchestrator = 2

[[faults]]
service = "llm-inference"
instance = "llm-inference-1"
start_s = 30
end_s = 90
error_rate = 0.4
delay_ms = 250.0
"""
DATA = {
    "description": "an error burst",
    "duration_s": 200,
    "load": [[0, 1.0], [60, 2.0]],
    "retries": {"orchestrator": 2},
    "faults": [{"service": "llm-inference", "instance": "llm-inference-1", "start_s": 30, "end_s": 90,
                "error_rate": 0.4, "delay_ms": 250.0}],
}


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_every_preset_file_is_a_preset():
    assert preset_names() == sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))
    assert {"storm", "latency-spike", "slow-instance", "saturation"} <= set(preset_names())


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads(name):
    schedule = load_schedule(name)
    assert schedule.name == name
    assert schedule.description
    assert schedule.duration_s and schedule.duration_s > 0
    assert schedule.faults or schedule.load
    assert all(0 <= f.start_s < f.end_s <= schedule.duration_s for f in schedule.faults)


def test_storm_preset_retries_and_fails_the_inference():
    storm = load_schedule("storm")
    assert storm.retries == {"gateway": 1, "orchestrator": 2}
    [fault] = storm.faults
    assert (fault.service, fault.instance, fault.error_rate) == ("llm-inference", None, 0.5)


def test_toml_and_json_files_with_the_same_keys_give_the_same_schedule(tmp_path):
    from_toml = load_schedule(_write(tmp_path, "burst.toml", TOML))
    from_json = load_schedule(_write(tmp_path, "burst.json", json.dumps(DATA)))
    assert from_toml.faults == from_json.faults == (FaultWindow(
        service="llm-inference", instance="llm-inference-1", start_s=30, end_s=90, error_rate=0.4, delay_ms=250.0),)
    assert from_toml.load == from_json.load == LoadShape(((0.0, 1.0), (60.0, 2.0)))
    assert (from_toml.retries, from_toml.duration_s, from_toml.description) == ({"orchestrator": 2}, 200, "an error burst")
    # Only the name differs: a file's schedule is named by its path.
    assert from_toml == Schedule(**{**vars(from_json), "name": from_toml.name})
    assert from_toml.name.endswith("burst.toml") and from_json.name.endswith("burst.json")


def test_an_empty_schedule_is_steady_traffic():
    assert parse_schedule({}, "steady") == Schedule("steady")


@pytest.mark.parametrize(("data", "names"), [
    ({**DATA, "fualts": []}, ["fualts"]),
    ({**DATA, "faults": [{**DATA["faults"][0], "error": 0.5}]}, ["faults[0]", "error"]),
    ({**DATA, "retries": {"orchestrator": -1}}, ["retries"]),
    ({**DATA, "retries": {"orchestrator": 1.5}}, ["retries"]),
    ({**DATA, "retries": {"orchestrator": "2"}}, ["retries"]),
    ({**DATA, "faults": [{"service": "retrieval", "start_s": 10}]}, ["faults[0]", "end_s"]),
    ({**DATA, "faults": [DATA["faults"][0], {"start_s": 10, "end_s": 20}]}, ["faults[1]", "service"]),
])
def test_a_bad_schedule_is_a_value_error_naming_the_problem(data, names):
    with pytest.raises(ValueError) as raised:
        parse_schedule(data, "bad.toml")
    assert all(name in str(raised.value) for name in ["bad.toml", *names]), raised.value


@pytest.mark.parametrize(("name", "text", "what"), [("broken.toml", "faults = [", "TOML"),
                                                    ("broken.json", "{faults", "JSON")])
def test_an_unreadable_file_names_its_format(tmp_path, name, text, what):
    with pytest.raises(ValueError, match=f"broken.*not valid {what}"):
        load_schedule(_write(tmp_path, name, text))


def test_a_missing_spec_names_the_presets(tmp_path):
    with pytest.raises(ValueError) as raised:
        load_schedule(str(tmp_path / "nowhere.toml"))
    assert "nowhere.toml" in str(raised.value)
    assert all(name in str(raised.value) for name in preset_names())
