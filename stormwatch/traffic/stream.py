"""Generated traffic as the messages a deployment would send, in the order of the time they are sent.

Spans go out as a Collector's batch processor sends them: the spans that ended in one `batch_ms` of
event time, in ExportTraceServiceRequests of at most `max_spans` spans, sent when that time is over.
With `partitions` > 1 each batch is split by trace over that many messages, one per partition of the
source topic, as a fleet of Collectors keeps every partition fed: a reader's watermark is the least of
its partitions', so a partition left without a message for a few batches (a keyless message goes to a
random one) would hold every window back by that long.
Per-instance metrics go out when their interval is over, as native records (one per instance, keyed
by it) or as one OTLP ExportMetricsServiceRequest per interval. The generator makes traces in start
order, so a message is only let out once the generator's clock has passed its time: no later trace
can still add a span to it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count, groupby
from typing import Literal

from stormwatch.traffic.generator import Span, TraceGenerator
from stormwatch.traffic.metrics import InstanceInterval, otlp_metrics_request
from stormwatch.traffic.otlp import to_export_requests

MetricsFormat = Literal["native", "otlp"]


@dataclass(frozen=True)
class Output:
    kind: Literal["spans", "metrics"]
    time_unix_nano: int  # event time at which it is sent
    value: dict
    key: dict | None = None
    spans: int = 0  # how many spans a "spans" message holds
    partition: int | None = None  # the source topic's partition a "spans" message is for; None: any


class _Batches:
    """Spans waiting for their batch (a `batch_ns` window of end time) to be over."""

    def __init__(self, batch_ms: int, max_spans: int, partitions: int = 1) -> None:
        self.batch_ns = batch_ms * 1_000_000
        self.max_spans = max_spans
        self.partitions = partitions
        self.heap: list[tuple[int, int, Span]] = []
        self.sequence = count()

    def add(self, spans: list[Span]) -> None:
        for span in spans:
            heapq.heappush(self.heap, (span.end_unix_nano, next(self.sequence), span))

    def closed(self, until: int | None) -> list[Output]:
        """The messages of every batch over by `until` (all of them with None)."""
        out = []
        while self.heap:
            window_end = (self.heap[0][0] // self.batch_ns + 1) * self.batch_ns
            if until is not None and window_end > until:
                break
            spans = []
            while self.heap and self.heap[0][0] < window_end:
                spans.append(heapq.heappop(self.heap)[2])
            for partition, part in self._parts(spans):
                for i in range(0, len(part), self.max_spans):
                    chunk = part[i : i + self.max_spans]
                    [request] = to_export_requests(chunk, self.max_spans)
                    out.append(Output("spans", window_end, request, spans=len(chunk), partition=partition))
        return out

    def _parts(self, spans: list[Span]) -> list[tuple[int | None, list[Span]]]:
        """The batch's spans by partition: traces dealt in turn in the order they first appear, so each
        partition has one as long as the batch has that many traces."""
        if self.partitions == 1:
            return [(None, spans)]
        parts: list[list[Span]] = [[] for _ in range(self.partitions)]
        dealt: dict[str, int] = {}
        for span in spans:
            parts[dealt.setdefault(span.trace_id, len(dealt) % self.partitions)].append(span)
        return [(p, part) for p, part in enumerate(parts) if part]


def _metrics_outputs(intervals: list[InstanceInterval], metrics_format: MetricsFormat) -> list[Output]:
    if metrics_format == "native":
        return [Output("metrics", i.end_unix_nano, i.record(), key=i.key) for i in intervals]
    return [Output("metrics", end, otlp_metrics_request(group))
            for end, group in groupby(intervals, key=lambda i: i.end_unix_nano)]


def outputs(generator: TraceGenerator, rate_per_s: float, duration_s: float | None, batch_ms: int, max_spans: int,
            metrics_format: MetricsFormat | None = None, partitions: int = 1) -> Iterator[Output]:
    """Everything `generator.generate(rate_per_s, duration_s)` sends, ordered by the time it is sent;
    metrics too if `metrics_format` is given (the generator must have been made with metrics settings);
    each batch of spans over `partitions` messages (see the module's doc)."""
    batches = _Batches(batch_ms, max_spans, partitions)

    def ready(until: int | None) -> list[Output]:
        out = batches.closed(until)
        if metrics_format:
            out += _metrics_outputs(generator.metrics(final=until is None), metrics_format)
        # Spans before the metrics of the same moment: a reader has the calls when the interval closes.
        return sorted(out, key=lambda o: (o.time_unix_nano, o.kind != "spans"))

    for trace in generator.generate(rate_per_s, duration_s):
        batches.add(trace)
        yield from ready(generator.clock_unix_nano)
    yield from ready(None)
