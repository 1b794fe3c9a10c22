"""Stand-ins for what Flink hands a Python DataStream function, so a unit test calls `open`,
`process_element` and `on_timer` as Flink does: value and map state in memory, a timer service that
records the event-time timers set and answers with the watermark a test sets."""


class ValueState:
    def __init__(self):
        self._value = None

    def value(self):
        return self._value

    def update(self, value):
        self._value = value


class MapState(dict):
    def put(self, key, value):
        self[key] = value

    def remove(self, key):
        del self[key]


class RuntimeContext:
    def get_state(self, descriptor):
        return ValueState()

    def get_map_state(self, descriptor):
        return MapState()


# What Flink's timer service answers before the first watermark: Long.MIN_VALUE.
NO_WATERMARK = -2**63


class Context:
    """A process function's context whose timer service keeps the event-time timers set in `timers`
    and answers `current_watermark()` with `watermark` (set it as Flink would before calling on_timer)."""

    def __init__(self):
        self.timers = set()
        self.watermark = NO_WATERMARK

    def current_watermark(self):
        return self.watermark

    def timer_service(self):
        return self

    def register_event_time_timer(self, t):
        self.timers.add(t)
