"""Root-cause ranking over the per-window aggregates Flink SQL computes from spans.

Pure logic: a `SuspectRanker` sees, window after window, one `ServiceWindow` per service and one
`EdgeWindow` per caller→callee pair, and ranks the services by how likely each is the root cause.

Signals
-------
Every signal is scored as a *surprise*: -log10 of the one-sided tail probability of the window's
value under that service's own baseline (3 = "one window in a thousand is at least this bad").
Two signals are *local*, they say what the service did itself, and make its score:

- ``error_origins`` (error spans none of whose children is in error) per span. Baseline:
  Gamma-Poisson, the service's decayed error and span counts on top of a Gamma prior around the
  pooled rate of all services, scored with the negative-binomial predictive: honest with a few
  dozen spans of history, and a service never seen before gets the population's wide prior.
- ``own_time``: what the service adds to its callers' latency: its exclusive time per request net
  of the gaps of its own outgoing calls (a CLIENT span's exclusive time is the network and the
  callee's queue, which are the callee's), plus the gap (CLIENT minus SERVER) its callers see per
  inbound call. CPU contention raises the first part, network delay on the pod the second.

``self_time`` and ``inbound_gap`` (the two parts) and ``server_latency`` (the SERVER p50, which
holds the callees' time too) are judged the same way, as symptoms and evidence, never as score.

Latency is judged on y = log(1 + ms). In normal operation y varies from window to window about as
much with 30 requests as with one (requests of a window share load, GC pauses, noisy neighbours)
and with heavy tails, so each window is one observation of a Student t with ``latency_tail_dof``
degrees of freedom, fitted robustly per service, its scale shrunk towards ``latency_prior_scale``.
Both baselines, and the surprise, are stormwatch/baselines.py's, which the shape signals share.

Attribution
-----------
A signal is *affected* when its surprise reaches -log10(flag_alpha). A suspect is *flagged* when
its score reaches log10(tests / flag_alpha): Bonferroni over the window's local tests, so a window
of normal operation flags anything at all with probability about ``flag_alpha``. The call graph
holds every caller→callee edge seen (networkx); on its affected part, an affected descendant with
a local anomaly *explains* its affected ancestors, and an explained service's score is multiplied
by ``explained_discount``: the most downstream affected service, which explains its affected
callers, ranks first (details: `SuspectRanker._attribute`).

Baselines forget with a half-life, per data seen; a signal beyond -log10(absorb_alpha) (1 %: a
fault answering a few calls a window is rarely beyond the flag level) is not absorbed, other latency
outliers only with their small t weight, so a fault does not become the new normal.

Shape signals
-------------
Given the window's assembled traces (`observe(..., shape=WindowShape)`, what `stormwatch backtest`
does; the job does not have them yet), the shape signals of stormwatch/trace_signals.py join the
local ones: call pattern and operation latency are the service's own doing and score like error
origins and own time; operation presence, the trace spectrum and errors of callers right after its
answers point at it through others' behaviour, so they score times ``indirect_weight`` and never
make it explain its callers. Each is one more test of the window's Bonferroni count. A suspect's
evidence lists its most surprising shape evidence with example trace ids (``shape``).

Silence
-------
A service with no record and no visit in a window (it answered no call: with 3-12 calls a window
that happens) keeps its last score, less ``silent_drain`` per window of data, unless it scores more
now: not answering is no evidence of health.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields

import networkx as nx

from stormwatch.baselines import RateBaseline, StudentTBaseline, surprise_of
from stormwatch.trace_signals import ERROR_AFTER_CALL, OPERATION_RATE, TRACE_SPECTRUM, ShapeEvidence, ShapeJudge, WindowShape

# Shape signals that point at a service from others' behaviour, not from what it did itself (its
# callers fail after its answers; anomalous traces pass through it; its operations are called more
# or less, which its callers decide): they rank it, weighted, but do not make it explain its callers.
INDIRECT_SIGNALS = (ERROR_AFTER_CALL, TRACE_SPECTRUM, OPERATION_RATE)

ERRORS, OWN_TIME = "error_origins", "own_time"
SELF_TIME, INBOUND_GAP, SERVER_LATENCY = "self_time", "inbound_gap", "server_latency"
LATENCY_SIGNALS = (OWN_TIME, SELF_TIME, INBOUND_GAP, SERVER_LATENCY)
LOCAL_SIGNALS = (ERRORS, OWN_TIME)


@dataclass(frozen=True)
class ServiceWindow:
    """One service in one window (definitions: stormwatch/window_aggregates.py, which the Flink SQL must match)."""

    service: str
    window_start_ms: int
    window_end_ms: int
    spans: int
    server_spans: int
    errors: int
    error_origins: int
    server_p50_ms: float | None
    server_p95_ms: float | None
    self_ms_total: float
    inbound_calls: int
    inbound_gap_ms_total: float


@dataclass(frozen=True)
class EdgeWindow:
    """Cross-service parent→child span pairs of one caller→callee pair in one window."""

    caller: str
    callee: str
    window_start_ms: int
    window_end_ms: int
    calls: int
    client_errors: int
    server_errors: int
    gap_ms_total: float
    # Calls that repeat an earlier attempt of the same logical call (stormwatch/window_aggregates.py).
    retries: int = 0


# The caller of a trace's root span in stormwatch_edges: the outside world, not a service.
USER = "user"


def _from_record(cls, record: Mapping):
    """The record's fields of `cls`; a field with a default may be absent (a record older than it)."""
    return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record or f.default is MISSING})


def service_windows(records: Iterable[Mapping]) -> list[ServiceWindow]:
    """A window's stormwatch_service_windows records (more columns allowed) as the ranker takes them."""
    return sorted((_from_record(ServiceWindow, r) for r in records), key=lambda s: s.service)


def ranked_edges(records: Iterable[Mapping]) -> list[EdgeWindow]:
    """The edges of a window's stormwatch_edges records that the ranker weighs: calls from one traced
    service to another. A root's caller `user` and an untraced callee (`callee_virtual`: a database, an
    external API named by the CLIENT span) have no service window of their own."""
    return [_from_record(EdgeWindow, r) for r in records if not r["callee_virtual"] and r["caller"] != USER]


@dataclass(frozen=True)
class SuspectPolicy:
    """The ranker's few knobs; bench/results/rootcause_eval.md shows how much each one matters."""

    # Baselines forget with this half-life of data seen: long against a fault (minutes), short
    # against a day's drift.
    baseline_half_life_s: float = 1800.0
    # Per window of normal operation, the probability that any service is flagged; and, per
    # signal, the tail beyond which a value counts as affected (and stays out of the baseline).
    flag_alpha: float = 0.001
    # Windows of history a latency baseline needs before it judges: a service's first windows
    # only teach it what normal is.
    min_baseline_windows: float = 2.0
    # Error origins per span assumed before any service has a baseline.
    error_prior_rate: float = 0.01
    # Gamma shape of a service's error rate around the pooled rate: small = services differ a lot
    # (in normal operation a few services log errors on a tenth of their spans, most never do).
    error_prior_shape: float = 0.1
    # Window-to-window spread of log(1 + ms) in normal operation: Student-t degrees of freedom
    # (heavy tails: a window of one or two requests easily takes 5x the usual time) and the scale
    # assumed before a service has history (0.3: a window typically within ±30% of the usual),
    # weighing this many windows.
    latency_tail_dof: float = 3.0
    latency_prior_scale: float = 0.3
    latency_prior_windows: float = 20.0
    # Score multiplier of a service whose anomaly an affected callee explains.
    explained_discount: float = 0.5
    # Shape signals (stormwatch/trace_signals.py), judged when the window's traces are given.
    # Visits of an operation (traces of a request type) its latency baseline needs before it judges.
    min_baseline_visits: float = 5.0
    # Per-visit spread of log(1 + own ms) assumed before an operation has history, weighing this many visits.
    visit_prior_scale: float = 0.5
    visit_prior_n: float = 5.0
    # Shares (visits of an operation that call a callee; traces of a request type that visit an
    # operation): the weight of the Jeffreys prior, and the most a baseline may weigh, in trials.
    share_prior_weight: float = 1.0
    share_max_weight: float = 30.0
    # Example trace ids kept per piece of evidence.
    example_traces: int = 3
    # A trace is anomalous (for the trace spectrum) when its latency or an error in it is at least
    # this improbable under its baselines.
    trace_anomaly_alpha: float = 0.01
    # A service with no record in a window (it answered no call: 3-12 a window is common) keeps its
    # last score, less this much per window of data: silence is no evidence of health.
    silent_drain: float = 1.0
    # Tail beyond which a window's signal stays out of its baseline (None: flag_alpha). Larger than
    # flag_alpha keeps a fault's weak windows (one failing call of three) from teaching it normal.
    absorb_alpha: float | None = 0.01
    # Weight of the indirect shape signals (errors of callers right after a call; the trace
    # spectrum) in a score: they point at a service through others' behaviour, which the others'
    # own faults explain as well.
    indirect_weight: float = 0.25

    def weight(self, signal: str) -> float:
        return self.indirect_weight if signal in INDIRECT_SIGNALS else 1.0

    @property
    def absorb_surprise(self) -> float:
        """A signal at least this surprising stays out of its baseline (absorb_alpha, else flag_alpha)."""
        return -math.log10(self.absorb_alpha if self.absorb_alpha is not None else self.flag_alpha)

    @property
    def affected_surprise(self) -> float:
        return -math.log10(self.flag_alpha)

    def flag_surprise(self, tests: int) -> float:
        """Surprise a single test must reach so that `tests` tests keep `flag_alpha` together."""
        return math.log10(max(tests, 1) / self.flag_alpha)


@dataclass(frozen=True)
class Suspect:
    service: str
    score: float
    confidence: float
    flagged: bool
    evidence: dict


@dataclass(frozen=True)
class WindowVerdict:
    window_start_ms: int
    window_end_ms: int
    # Score a suspect needs to be flagged in this window.
    threshold: float
    suspects: list[Suspect]

    @property
    def flagged(self) -> list[Suspect]:
        return [s for s in self.suspects if s.flagged]

    def rank_of(self, service: str) -> int | None:
        """1-based rank of `service`, None if it had no record in the window."""
        return next((i for i, s in enumerate(self.suspects, 1) if s.service == service), None)


@dataclass
class _ServiceBaseline:
    errors: RateBaseline = field(default_factory=RateBaseline)
    # Each window one observation of y = log(1 + ms).
    latency: dict[str, StudentTBaseline] = field(default_factory=lambda: {s: StudentTBaseline() for s in LATENCY_SIGNALS})

    def decay(self, factor: float) -> None:
        self.errors.decay(factor)
        for part in self.latency.values():
            part.decay(factor)


@dataclass(frozen=True)
class _Judged:
    """One signal of one service in one window, against its baseline."""

    value: float
    # What the baseline expects: error origins in this window, or the typical ms.
    expected: float | None
    surprise: float


def _measures(record: ServiceWindow, outgoing_gap_ms: float) -> dict[str, float]:
    """The window's value of every signal the record has the units for.

    own_time is the sum of the parts the window has: a window can hold a call's completion
    (its gap) but not the request's SERVER span, or the reverse, and then the missing part counts 0
    (biased low, so never a false alarm).
    """
    out = {ERRORS: float(record.error_origins)}
    if record.inbound_calls > 0:
        out[INBOUND_GAP] = record.inbound_gap_ms_total / record.inbound_calls
    if record.server_spans > 0:
        out[SELF_TIME] = max(0.0, record.self_ms_total - outgoing_gap_ms) / record.server_spans
    if record.server_p50_ms is not None:
        out[SERVER_LATENCY] = record.server_p50_ms
    if SELF_TIME in out or INBOUND_GAP in out:
        out[OWN_TIME] = out.get(SELF_TIME, 0.0) + out.get(INBOUND_GAP, 0.0)
    return out


class SuspectRanker:
    """Ranks the services of each window by how likely each is the root cause; keeps the baselines."""

    def __init__(self, policy: SuspectPolicy | None = None) -> None:
        self.policy = policy or SuspectPolicy()
        self._baselines: dict[str, _ServiceBaseline] = {}
        self._population = RateBaseline()
        self._graph = nx.DiGraph()
        self._last_start_ms: int | None = None
        self._shape = ShapeJudge(self.policy)
        # service -> (its last score, the end of the window that gave it)
        self._last_scores: dict[str, tuple[float, int]] = {}

    def observe(self, services: list[ServiceWindow], edges: list[EdgeWindow], shape: WindowShape | None = None) -> WindowVerdict:
        """Ranks one window's services against the baselines, then adds the window to them.

        `shape`, the window's assembled traces, adds the shape signals (stormwatch/trace_signals.py)
        to the local ones; without it the ranking is the aggregates' alone."""
        records = sorted(services, key=lambda r: r.service)
        bounds = {(r.window_start_ms, r.window_end_ms) for r in [*records, *edges]}
        if len(bounds) != 1 or len({r.service for r in records}) != len(records):
            raise ValueError(f"one window's records, one per service, expected; got windows {sorted(bounds)}")
        ((start_ms, end_ms),) = bounds
        if end_ms <= start_ms:
            raise ValueError(f"window [{start_ms}, {end_ms}) is empty")
        weight = self._advance(start_ms, end_ms - start_ms)
        outgoing_gap: dict[str, float] = {}
        for e in sorted(edges, key=lambda e: (e.caller, e.callee)):
            self._graph.add_edge(e.caller, e.callee)
            outgoing_gap[e.caller] = outgoing_gap.get(e.caller, 0.0) + e.gap_ms_total

        pooled_rate = self._pooled_error_rate()
        measures = {r.service: _measures(r, outgoing_gap.get(r.service, 0.0)) for r in records}
        judged = {r.service: self._judge(r, measures[r.service], pooled_rate) for r in records}
        shaped: dict[str, list[ShapeEvidence]] = {}
        if shape is not None:
            for e in self._shape.judge(shape):
                shaped.setdefault(e.service, []).append(e)
                judged.setdefault(e.service, {})
            for t in shape.traces:
                for v in t.visits:
                    for c in v.calls:
                        self._graph.add_edge(v.service, c.callee)
        tests = len(LOCAL_SIGNALS) * len(records) + sum(map(len, shaped.values()))
        present = {r.service for r in records} | ({v.service for t in shape.traces for v in t.visits} if shape else set())
        suspects = self._with_silent(self._attribute(judged, shaped, tests), present, weight, tests)
        self._last_scores.update({s.service: (s.score, s.evidence.get("silent_since_ms", end_ms)) for s in suspects})
        self._last_scores = {k: v for k, v in self._last_scores.items() if v[0] > 0}
        for r in records:
            self._absorb(r, measures[r.service], judged[r.service], weight)
        if shape is not None:
            self._shape.absorb(shape, weight)
        return WindowVerdict(start_ms, end_ms, self.policy.flag_surprise(tests), suspects)

    def _advance(self, start_ms: int, size_ms: int) -> float:
        """Decays every baseline for the step to `start_ms`; returns the weight of this window's data.

        Sliding windows overlap, so each weighs slide/size and every span counts once overall. A
        gap in the stream (an outage, a quiet night) counts as one window: baselines forget by
        data seen, not by wall-clock time.
        """
        if self._last_start_ms is None:
            self._last_start_ms = start_ms
            return 1.0
        # A window out of order or repeated adds nothing and forgets nothing.
        step_ms = max(0, min(start_ms - self._last_start_ms, size_ms))
        self._last_start_ms = max(start_ms, self._last_start_ms)
        factor = 0.5 ** (step_ms / 1000 / self.policy.baseline_half_life_s)
        self._population.decay(factor)
        for baseline in self._baselines.values():
            baseline.decay(factor)
        self._shape.decay(factor)
        return step_ms / size_ms

    def _pooled_error_rate(self) -> float:
        """Error origins per span over all services; the policy's prior rate weighs one shape's worth."""
        shape, rate = self._population.posterior(self.policy.error_prior_rate, self.policy.error_prior_shape)
        return shape / rate

    def _judge(self, record: ServiceWindow, measures: dict[str, float], pooled_rate: float) -> dict[str, _Judged]:
        baseline = self._baselines.setdefault(record.service, _ServiceBaseline())
        expected, surprise = baseline.errors.judge(measures[ERRORS], record.spans, pooled_rate, self.policy.error_prior_shape)
        out = {ERRORS: _Judged(measures[ERRORS], expected, surprise)}
        for signal in LATENCY_SIGNALS:
            if signal in measures:
                history = baseline.latency[signal]
                out[signal] = _Judged(measures[signal], history.typical_ms(), self._latency_surprise(history, measures[signal]))
        return out

    def _latency_surprise(self, history: StudentTBaseline, ms: float) -> float:
        """Surprise of a window at least as slow as `ms`; 0 while the baseline is too short to judge."""
        p = self.policy
        if history.n < p.min_baseline_windows:
            return 0.0
        return surprise_of(history.tail(math.log1p(ms), p.latency_tail_dof, p.latency_prior_scale, p.latency_prior_windows))

    def _absorb(self, record: ServiceWindow, measures: dict[str, float], judged: dict[str, _Judged], weight: float) -> None:
        """Adds the window's unaffected signals to the service's baseline, latency with its t weight.

        An affected signal stays out, so an ongoing fault does not become normal (one error is news
        when the rate is near zero). A lasting change of level is learned all the same once the
        baseline has decayed below `min_baseline_windows` (about four half-lives). The population's
        error rate takes every window: it is what errors look like anywhere, bursts included.
        """
        baseline = self._baselines[record.service]
        self._population.absorb(measures[ERRORS], record.spans, weight)
        limit = self.policy.absorb_surprise
        if judged[ERRORS].surprise < limit:
            baseline.errors.absorb(measures[ERRORS], record.spans, weight)
        for signal in LATENCY_SIGNALS:
            if signal in measures and judged[signal].surprise < limit:
                baseline.latency[signal].absorb(math.log1p(measures[signal]), weight, self.policy.latency_tail_dof,
                                                self.policy.latency_prior_scale, self.policy.latency_prior_windows)

    def _evidence(self, signals: dict[str, _Judged], shaped: list[ShapeEvidence]) -> dict:
        local = [(signals[k].surprise, k) for k in LOCAL_SIGNALS if k in signals]
        local += [(self.policy.weight(e.signal) * e.surprise, e.signal) for e in shaped]
        ev: dict = {"signal": max(local, key=lambda x: (x[0], x[1] in LOCAL_SIGNALS))[1] if local else None}
        if shaped:
            top = sorted(shaped, key=lambda e: (-e.surprise, e.signal, e.key))[: self.policy.example_traces + 2]
            ev["shape"] = [e.as_dict() for e in top if e.surprise > 0]
        for signal, j in sorted(signals.items()):
            if signal == ERRORS:
                ev["error_origins"] = int(j.value)
                ev["expected_error_origins"] = round(j.expected, 3)
                ev["excess_error_origins"] = round(j.value - j.expected, 3)
            else:
                ev[f"{signal}_ms"] = round(j.value, 3)
                ev[f"{signal}_baseline_ms"] = None if j.expected is None else round(j.expected, 3)
                ev[f"{signal}_ratio"] = round(j.value / j.expected, 3) if j.expected else None
        ev["surprise"] = {signal: round(j.surprise, 3) for signal, j in sorted(signals.items())}
        return ev

    def _with_silent(self, suspects: list[Suspect], present: set[str], weight: float, tests: int) -> list[Suspect]:
        """Services scored before that answered nothing in this window (no record, no visit) keep
        their last score, drained by `silent_drain` per window of data, unless they score more now."""
        flag = self.policy.flag_surprise(tests)
        by_service = {s.service: s for s in suspects}
        for service in sorted(set(self._last_scores) - present):
            last, since = self._last_scores[service]
            score = max(0.0, last - weight * self.policy.silent_drain)
            now = by_service.get(service)
            if score <= 0 or (now is not None and now.score >= score):
                continue
            ev = dict(now.evidence) if now is not None else {"explains": [], "explained_by": []}
            ev.update({"signal": "silent", "silent_since_ms": since, "last_score": round(last, 6)})
            confidence = max(0.0, 1.0 - tests * 10.0 ** (-score))
            by_service[service] = Suspect(service, round(score, 6), round(confidence, 6), score >= flag, ev)
        return sorted(by_service.values(), key=lambda s: (-s.score, s.service))

    def _attribute(self, judged: dict[str, dict[str, _Judged]], shaped: dict[str, list[ShapeEvidence]], tests: int) -> list[Suspect]:
        """Local scores, discounted where another affected service explains them.

        Explanations run along the affected part of the call graph. An affected descendant with a
        local anomaly explains its affected ancestors: failures and slowness propagate to callers,
        and a caller's timeout turns slowness into errors. Except an anomaly carried by the
        inbound gap alone (the callee's own processing is normal) when a direct caller's own
        processing is affected: a CPU-starved caller's client spans end late, so the gap is the
        caller's, and the callee explains nobody.
        """
        policy = self.policy
        limit, flag = policy.affected_surprise, policy.flag_surprise(tests)

        def hit(service: str, signal: str) -> bool:
            return signal in judged[service] and judged[service][signal].surprise >= limit

        own = {s: max([signals[k].surprise for k in LOCAL_SIGNALS if k in signals]
                      + [e.surprise for e in shaped.get(s, []) if e.signal not in INDIRECT_SIGNALS], default=0.0)
               for s, signals in judged.items()}
        local = {s: max([own[s]] + [policy.weight(e.signal) * e.surprise for e in shaped.get(s, [])]) for s in judged}
        paths = self._graph.subgraph(s for s, signals in judged.items()
                                     if any(j.surprise >= limit for j in signals.values()) or local[s] >= limit)
        gap_of = {
            c: sorted(p for p in paths.predecessors(c) if hit(p, SELF_TIME))
            for c in sorted(paths)
            if hit(c, INBOUND_GAP) and not hit(c, SELF_TIME)
        }
        roots = {c for c in paths if own[c] >= limit and not gap_of.get(c)}
        explained_by = {s: sorted((nx.descendants(paths, s) & roots) | set(gap_of.get(s, []))) for s in sorted(paths)}
        suspects = []
        for service in sorted(judged):
            culprits = explained_by.get(service, [])
            score = local[service] * (policy.explained_discount if culprits else 1.0)
            ev = self._evidence(judged[service], shaped.get(service, []))
            ev["explains"] = sorted(s for s, by in explained_by.items() if service in by)
            ev["explained_by"] = culprits
            # 1 - the Bonferroni-adjusted p-value: flagged exactly when confidence >= 1 - flag_alpha.
            confidence = max(0.0, 1.0 - tests * 10.0 ** (-score))
            suspects.append(Suspect(service, round(score, 6), round(confidence, 6), score >= flag, ev))
        suspects.sort(key=lambda s: (-s.score, s.service))
        return suspects
