"""What the jobs' Python DataStream operators share: the dead-letter row they put aside, and a buffer of
records per window that releases each window whole once the watermark has reached its last millisecond."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pyflink.common import Types
from pyflink.datastream import OutputTag
from pyflink.datastream.state import MapStateDescriptor

# A record a job cannot use, as stormwatch_dead_letters holds it (sql/tables/stormwatch_dead_letters.sql).
DEAD_LETTER = Types.ROW_NAMED(
    ["source_topic", "source_partition", "source_offset", "reason", "payload", "job"],
    [Types.STRING(), Types.INT(), Types.LONG(), Types.STRING(), Types.STRING(), Types.STRING()],
)
DEAD_LETTERS = OutputTag("dead_letters", DEAD_LETTER)


class WindowBuffer:
    """Per key, the records of each window (by its end, ms) in Flink map state: `add` keeps one and sets
    an event-time timer at the window's end; `closed`, called from the timer, hands over every window the
    watermark has passed, in window order, and forgets it. A window's batch starts as `empty()`; `into`
    names the list of a dict batch a record goes to (a plain list batch takes it as it is)."""

    def __init__(self, runtime_context, empty: Callable[[], object] = list, name: str = "pending"):
        self.pending = runtime_context.get_map_state(MapStateDescriptor(name, Types.LONG(), Types.PICKLED_BYTE_ARRAY()))
        self.empty = empty

    def add(self, ctx, window_end_ms: int, record, into: str | None = None) -> None:
        batch = self.pending.get(window_end_ms) or self.empty()
        (batch if into is None else batch[into]).append(record)
        self.pending.put(window_end_ms, batch)
        # A window [start, end) is whole once the watermark reaches its last millisecond (Flink's
        # maxTimestamp): upstream window operators emit it then, and the span path passes that watermark
        # on at once. A timer at `end` itself would wait for the next watermark: a slide later.
        ctx.timer_service().register_event_time_timer(window_end_ms - 1)

    def closed(self, watermark: int) -> Iterator[tuple[int, object]]:
        for end in sorted(k for k in self.pending.keys() if k - 1 <= watermark):
            batch = self.pending.get(end)
            self.pending.remove(end)
            yield end, batch
