"""The scaling job's per-service operator (jobs/scaling.py GatherWindows), called as Flink calls it: the
instance rows of a service and its breaker as of each window (from its health records) in, each window
out once the watermark has passed it and its breaker is known, with the breaker as of its end; a late
instance row out to the dead letters."""

import json

from pyflink.common import Row

from jobs.scaling import BREAKER, GatherWindows, breaker_named
from jobs.streams import DEAD_LETTERS
from tests.unit.flink_fakes import Context, RuntimeContext

START = 1_767_225_600_000
ENDS = [START + k * 10_000 for k in range(5)]
TOPIC = "stormwatch_instance_windows"


def _instance(end: int, instance: str = "svc-0", offset: int = 0) -> Row:
    return Row(entity_key="svc", payload=json.dumps({
        "service": "svc", "instance": instance, "window_start_ms": end - 30_000, "window_end_ms": end, "calls": 100,
        "errors": 0, "kafka_partition": 1, "kafka_offset": offset}))


def _breaker(end: int, state: str) -> dict:
    return {"decision_id": f"{end:032x}", "state": state, "window_end_ms": end, "enforced": True}


def _health(end: int, breaker: dict | None) -> Row:
    """The service's health record of the window ending at `end`, naming its breaker as of then."""
    return Row(entity_key="svc", payload=json.dumps({BREAKER: {"window_end_ms": end, "breaker": breaker}}))


def _gather():
    gather, ctx = GatherWindows(TOPIC), Context()
    gather.open(RuntimeContext())
    return gather, ctx


def _feed(gather, ctx, rows) -> list:
    return [out for row in rows for out in gather.process_element(row, ctx)]


def _timer(gather, ctx, watermark: int) -> list:
    ctx.watermark = watermark   # Flink advances the watermark, then fires the timers up to it
    return list(gather.on_timer(watermark, ctx))


def _windows(out) -> list[dict]:
    return [json.loads(r.payload) for r in out]


def test_each_window_leaves_with_the_breaker_as_of_its_end():
    gather, ctx = _gather()
    opened, closed = _breaker(ENDS[1], "OPEN"), _breaker(ENDS[3], "CLOSED")
    assert _feed(gather, ctx, [_instance(ENDS[0]), _health(ENDS[0], None), _instance(ENDS[1]), _health(ENDS[1], opened),
                               _instance(ENDS[2]), _health(ENDS[2], opened), _instance(ENDS[3]),
                               _health(ENDS[3], closed)]) == []
    # A window's timer is at its last millisecond (jobs/streams.py WindowBuffer); health records set no
    # timer: they close no window.
    assert ctx.timers == {end - 1 for end in ENDS[:4]}
    out = _windows(_timer(gather, ctx, ENDS[2] - 1))
    assert [(o["window_end_ms"], o["breaker"] and o["breaker"]["state"]) for o in out] == [
        (ENDS[0], None), (ENDS[1], "OPEN"), (ENDS[2], "OPEN")]
    assert out[1]["breaker"]["decision_id"] == f"{ENDS[1]:032x}" and out[1]["instances"][0]["instance"] == "svc-0"
    # What the windows left need: the newest decision at or before the last window out, and those after it.
    assert [t for t, _ in gather.breakers.value()] == [ENDS[1], ENDS[3]]
    (last,) = _windows(_timer(gather, ctx, ENDS[3] - 1))
    assert last["breaker"]["state"] == "CLOSED"


def test_a_window_waits_for_its_breaker_however_quiet_the_breaker_topic():
    # The watermark passes the window the breaker opened in before the service's health record of it has
    # come: the window waits, and leaves with the OPEN breaker once it does, not with the CLOSED before.
    gather, ctx = _gather()
    _feed(gather, ctx, [_instance(ENDS[0]), _health(ENDS[0], None), _instance(ENDS[1])])
    out = _windows(_timer(gather, ctx, ENDS[1] - 1))
    assert [o["window_end_ms"] for o in out] == [ENDS[0]]
    assert _timer(gather, ctx, ENDS[2] - 1) == []
    opened = _breaker(ENDS[1], "OPEN")
    (window,) = _windows(_feed(gather, ctx, [_health(ENDS[1], opened)]))
    assert window["window_end_ms"] == ENDS[1] and window["breaker"] == opened


def test_a_later_health_record_releases_the_windows_before_it():
    # A service's health records come in window order (one key, one partition): one of a later window
    # means the breaker is known through it.
    gather, ctx = _gather()
    _feed(gather, ctx, [_instance(ENDS[0]), _instance(ENDS[1])])
    assert _timer(gather, ctx, ENDS[1] - 1) == []
    out = _windows(_feed(gather, ctx, [_health(ENDS[2], _breaker(ENDS[1], "OPEN"))]))
    assert [(o["window_end_ms"], o["breaker"] and o["breaker"]["state"]) for o in out] == [
        (ENDS[0], None), (ENDS[1], "OPEN")]


def test_a_row_after_its_window_left_is_a_dead_letter_and_the_window_leaves_once():
    gather, ctx = _gather()
    _feed(gather, ctx, [_instance(ENDS[0], "svc-0"), _instance(ENDS[1], "svc-0"), _health(ENDS[1], None)])
    assert [o["window_end_ms"] for o in _windows(_timer(gather, ctx, ENDS[0] - 1))] == [ENDS[0]]
    # svc-1's row of the window already out: put aside with the reason, no timer, nothing re-opened.
    timers = set(ctx.timers)
    (dead,) = _feed(gather, ctx, [_instance(ENDS[0], "svc-1", offset=42)])
    tag, letter = dead
    assert tag is DEAD_LETTERS
    assert (letter[0], letter[1], letter[2], letter[5]) == (TOPIC, 1, 42, "scaling")
    assert str(ENDS[0]) in letter[3] and json.loads(letter[4])["instance"] == "svc-1"
    assert ctx.timers == timers
    out = _windows(_timer(gather, ctx, ENDS[1] - 1))
    assert [(o["window_end_ms"], [r["instance"] for r in o["instances"]]) for o in out] == [(ENDS[1], ["svc-0"])]
    assert _timer(gather, ctx, ENDS[2] - 1) == []


def test_a_row_of_a_window_the_watermark_passed_is_a_dead_letter_even_if_none_left():
    # No row of the window came before the watermark passed it: a window that late would be decided out
    # of order (after later windows), so its row is put aside too.
    gather, ctx = _gather()
    _timer(gather, ctx, ENDS[1] - 1)
    ((tag, letter),) = _feed(gather, ctx, [_instance(ENDS[0])])
    assert tag is DEAD_LETTERS and "closed" in letter[3]
    assert ctx.timers == set()


def test_the_breaker_named_by_a_health_record():
    assert breaker_named({"decision_id": "a" * 32, "state": "OPEN", "breaker_window_end_ms": 5, "enforced": False}) == {
        "decision_id": "a" * 32, "state": "OPEN", "window_end_ms": 5, "enforced": False}
    assert breaker_named({"decision_id": None, "state": None, "breaker_window_end_ms": None, "enforced": None}) is None
