"""What the jobs' Python DataStream operators share: the dead-letter row they put aside, and a buffer of
records per window that releases each window whole once the watermark has reached its last millisecond."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pyflink.common import Types
from pyflink.datastream import OutputTag
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

# A record a job cannot use, as stormwatch_dead_letters holds it (sql/tables/stormwatch_dead_letters.sql).
DEAD_LETTER = Types.ROW_NAMED(
    ["source_topic", "source_partition", "source_offset", "reason", "payload", "job"],
    [Types.STRING(), Types.INT(), Types.LONG(), Types.STRING(), Types.STRING(), Types.STRING()],
)
DEAD_LETTERS = OutputTag("dead_letters", DEAD_LETTER)


class WindowBuffer:
    """Per key, the records of each window (by its end, ms) in Flink map state: `add` keeps one and sets
    an event-time timer at the window's end; `closed`, called from the timer, hands over every window the
    watermark has passed (a caller may hold some back: `through`), in window order, and forgets it. A window's batch starts as `empty()`; `into`
    names the list of a dict batch a record goes to (a plain list batch takes it as it is).

    A window is handed over once: `add` refuses (returns the reason, keeps nothing) a record of a window
    the watermark has already reached, or at or before one already handed over for the key. Kept, it
    would open the window again, its timer (in the past) would fire at the next watermark and the
    window would leave a second time with the late records alone. The caller puts it aside."""

    def __init__(self, runtime_context, empty: Callable[[], object] = list, name: str = "pending"):
        self.pending = runtime_context.get_map_state(MapStateDescriptor(name, Types.LONG(), Types.PICKLED_BYTE_ARRAY()))
        # The end of the last window handed over, per key: a restart's watermark starts from nothing.
        self.closed_through = runtime_context.get_state(ValueStateDescriptor(f"{name}_closed_through", Types.LONG()))
        self.empty = empty

    def add(self, ctx, window_end_ms: int, record, into: str | None = None) -> str | None:
        """Keep `record` in its window; None, or why it was refused (its window has left or is due)."""
        through = self.closed_through.value()
        if through is not None and window_end_ms <= through:
            return f"window ending {window_end_ms} was already emitted (through {through}) when this record came"
        watermark = ctx.timer_service().current_watermark()
        # A window [start, end) is whole once the watermark reaches its last millisecond (Flink's
        # maxTimestamp): upstream window operators emit it then, and the span path passes that watermark
        # on at once. A timer at `end` itself would wait for the next watermark: a slide later.
        if watermark is not None and window_end_ms - 1 <= watermark:
            return f"window ending {window_end_ms} had closed (watermark {watermark}) when this record came"
        batch = self.pending.get(window_end_ms) or self.empty()
        (batch if into is None else batch[into]).append(record)
        self.pending.put(window_end_ms, batch)
        ctx.timer_service().register_event_time_timer(window_end_ms - 1)
        return None

    def closed(self, watermark: int, through: int | None = None) -> Iterator[tuple[int, object]]:
        """The windows the watermark has passed (and, with `through`, that end at or before it)."""
        for end in sorted(k for k in self.pending.keys() if k - 1 <= watermark and (through is None or k <= through)):
            batch = self.pending.get(end)
            self.pending.remove(end)
            self.closed_through.update(max(end, self.closed_through.value() or end))
            yield end, batch
