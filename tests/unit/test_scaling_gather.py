"""The scaling job's per-service operator (jobs/scaling.py GatherWindows), called as Flink calls it: the
instance rows and breaker decisions of a service in, each closed window out with its breaker as of its end."""

import json

from pyflink.common import Row

from jobs.scaling import BREAKER, GatherWindows
from tests.unit.flink_fakes import Context, RuntimeContext

START = 1_767_225_600_000


def _instance(end: int) -> Row:
    return Row(entity_key="svc", payload=json.dumps({"service": "svc", "instance": "svc-0", "window_start_ms": end - 30_000,
                                                     "window_end_ms": end, "calls": 100, "errors": 0}))


def _breaker(end: int, state: str) -> Row:
    return Row(entity_key="svc", payload=json.dumps({BREAKER: {"decision_id": f"{end:032x}", "state": state,
                                                               "window_end_ms": end, "enforced": True}}))


def test_each_window_leaves_with_the_breaker_as_of_its_end():
    gather, ctx = GatherWindows(), Context()
    gather.open(RuntimeContext())
    ends = [START + k * 10_000 for k in range(4)]
    for row in [_instance(ends[0]), _breaker(ends[1], "OPEN"), _instance(ends[1]), _instance(ends[2]),
                _breaker(ends[3], "CLOSED"), _instance(ends[3])]:
        assert list(gather.process_element(row, ctx)) == []
    # A window's timer is at its last millisecond (jobs/streams.py WindowBuffer); breaker decisions set
    # no timer: they close no window.
    assert ctx.timers == {end - 1 for end in ends}
    out = [json.loads(r.payload) for r in gather.on_timer(ends[2] - 1, ctx)]
    assert [(o["window_end_ms"], o["breaker"] and o["breaker"]["state"]) for o in out] == [
        (ends[0], None), (ends[1], "OPEN"), (ends[2], "OPEN")]
    assert out[1]["breaker"]["decision_id"] == f"{ends[1]:032x}" and out[1]["instances"][0]["instance"] == "svc-0"
    # What the windows left need: the newest decision at or before the watermark, and those after it.
    assert [t for t, _ in gather.breakers.value()] == [ends[1], ends[3]]
    (last,) = [json.loads(r.payload) for r in gather.on_timer(ends[3] - 1, ctx)]
    assert last["breaker"]["state"] == "CLOSED"
