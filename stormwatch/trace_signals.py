"""Shape signals: what the traces of a window did differently, per service, against its own baseline.

Plain Python, no Flink. Input: the window's assembled traces (stormwatch/traces.py: visits, calls,
request types), a trace belonging to every window that holds its ``end_ms``. Every signal is a
count, or a per-visit value, that one pass over one trace yields (the per-trace facts the JVM's
TraceFacts must emit for the job to compute them): the window's figures are sums of per-trace
facts, and the baselines live in the ranker.

Definitions (per window). A *share* is judged by its beta-binomial predictive: k hits in n trials
now against the decayed hits and trials of its baseline on a Jeffreys prior of weight
``share_prior_weight``, the baseline's weight capped at ``share_max_weight`` trials (trials of one
window share their conditions, so no baseline predicts a window better than that); the surprise is
-log10 of the two-sided tail, 2 min(P(K >= k), P(K <= k)). Where a key is judged per request type
(the trace's ``entry``, stormwatch/traces.py), the most surprising type counts, less log10 of the
number of types judged (Bonferroni).

- **call pattern** ``call_pattern``, key (service, operation, callee service), per request type:
  of the window's visits of the operation (trials), those that call the callee at least once
  (hits), for every callee it calls now or called in its baseline of that type. Fewer: it throws
  before calling on, or a wrong answer made it stop; more: a new branch. A service's calls depend
  on what it is asked, hence per request type. Blamed on the service: it decides which calls it
  makes.
- **operation rate** ``operation_rate``, key (service, operation), per request type: of the
  window's traces of the type (trials), those that visit the operation (hits): an operation that
  appears or vanishes. Indirect evidence (stormwatch/suspects.py INDIRECT_SIGNALS): its callers
  decide whether it is called.
- **operation latency** ``operation_latency``, key (service, operation): y = the mean over the
  window's visits of log(1 + own ms) (stormwatch/traces.py ``own_ms``: exclusive of its calls, plus
  the inbound gap), against a decayed Student-t fit of y over windows (each window one observation,
  as the service latencies of stormwatch/suspects.py, with their ``latency_*`` priors); surprise
  -log10 P(Y >= y). An operation slow among fast ones of the same service stands out here where the
  service's mean does not.
- **trace spectrum** ``trace_spectrum``, key (service, operation): a trace is *anomalous* when its
  root's duration has surprise >= -log10(trace_anomaly_alpha) under its request type's baseline (a
  Student-t of log(1 + ms) over that type's traces, judging once it has ``min_baseline_visits``),
  or an error origin in it is that improbable under its (service, operation)'s error-visit rate
  (Gamma-Poisson). Traces of normal operation are then anomalous at about that rate: the test takes
  the window's rate as it is. Of the window's N traces, F are anomalous; the key is on n of them,
  ef anomalous. Surprise: the hypergeometric tail P(X >= ef), X ~ HG(N, F, n) (a key unrelated to
  the anomaly samples the traces blindly); the Ochiai coefficient ef / sqrt(F n) is the value. A
  root cause sits on almost every anomalous trace and few normal ones. Indirect evidence.
- **error after call** ``error_after_call``, key (callee service): visits of other services whose
  first error origin ended right after one of their calls to the callee returned (stormwatch/traces.py
  ``error_after``), per call it answered, against its baseline: Gamma-Poisson around the pooled rate
  of all callees, one-sided. Evidence against the callee (its answers make its callers fail even when
  it logs nothing), indirect: the callers' own faults explain it as well.

Baselines take a window's key only while its surprise stays below -log10(absorb_alpha).

Every judged key keeps up to ``example_traces`` trace ids of the window that show it.

For the job (not done yet): the JVM's TraceFacts, per assembled trace, would emit these facts,
each summed per slide bucket and merged per window like the other Partials:

- per (request type, service, operation): visits; per (request type, service, operation, callee
  service): visits that call the callee at least once (call pattern);
- per request type: traces; per (request type, service, operation): traces that visit it (presence);
- per (service, operation): visits, the sum of log(1 + own ms) (latency), visits with an error origin;
- per callee service: calls answered, and visits whose first error origin came right after one of
  them (error after call);
- for the spectrum, per (request type, service, operation) and log-scale bucket of the trace's root
  duration: traces, and per (request type, error-origin operation): traces. Python then counts a
  window's anomalous traces per key from the buckets beyond its request type's threshold (the
  baselines stay in the ranker). Or, simpler at a few traces a second: one compact record per
  trace (id, request type, root duration, visited and error-origin operations), as here.
- example trace ids per key (a few per bucket, as the edges keep them).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from stormwatch.baselines import RateBaseline, StudentTBaseline, surprise_of
from stormwatch.traces import Trace

CALL_PATTERN, OPERATION_RATE, OPERATION_LATENCY = "call_pattern", "operation_rate", "operation_latency"
TRACE_SPECTRUM, ERROR_AFTER_CALL = "trace_spectrum", "error_after_call"
SHAPE_SIGNALS = (CALL_PATTERN, OPERATION_RATE, OPERATION_LATENCY, TRACE_SPECTRUM, ERROR_AFTER_CALL)


@dataclass(frozen=True)
class ShapeEvidence:
    """One judged key of one shape signal in one window."""

    service: str
    signal: str
    key: tuple[str, ...]
    value: float
    expected: float | None
    surprise: float
    examples: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"signal": self.signal, "key": list(self.key), "value": round(self.value, 3),
                "expected": None if self.expected is None else round(self.expected, 3),
                "surprise": round(self.surprise, 3), "examples": list(self.examples)}


@dataclass
class WindowShape:
    """The sums of a window's per-trace facts (what the job would merge from slide buckets)."""

    traces: list[Trace]

    @classmethod
    def of(cls, traces: list[Trace]) -> "WindowShape":
        return cls(sorted(traces, key=lambda t: (t.end_ms, t.trace_id)))


@dataclass
class _Share:
    """Decayed hits of a share whose trials are counted elsewhere (an op's visits, a type's traces):
    Beta posterior (a Jeffreys prior of `prior_weight` in all), its weight capped at `max_weight`
    (visits of one window share their conditions: no baseline predicts a window better than that)."""

    hits: float = 0.0

    def decay(self, factor: float) -> None:
        self.hits *= factor

    def judge(self, k: int, n: int, trials: float, prior_weight: float, max_weight: float = math.inf) -> tuple[float, float]:
        """(expected share, two-sided surprise of k hits in n) under the beta-binomial predictive."""
        a = min(self.hits, trials) + prior_weight / 2
        b = max(0.0, trials - self.hits) + prior_weight / 2
        if a + b > max_weight:
            a, b = a * max_weight / (a + b), b * max_weight / (a + b)
        share = a / (a + b)
        if n <= 0:
            return share, 0.0
        from scipy import stats  # here, not at import: scipy.stats hangs PyFlink's thread-mode interpreters

        upper = float(stats.betabinom.sf(k - 1, n, a, b)) if k > 0 else 1.0
        lower = float(stats.betabinom.cdf(k, n, a, b))
        return share, surprise_of(min(1.0, 2 * min(upper, lower)))

    def absorb(self, k: float, weight: float) -> None:
        self.hits += weight * k


def _mean_log(values: list[float]) -> float:
    return sum(math.log1p(v) for v in values) / len(values)


@dataclass
class ShapeBaselines:
    """Per-key baselines of the shape signals; `judge` then `absorb` once per window."""

    calls: dict[tuple[tuple[str, ...], tuple[str, str], str], _Share] = field(default_factory=dict)
    visits: dict[tuple[tuple[str, ...], tuple[str, str]], float] = field(default_factory=dict)
    presence: dict[tuple[tuple[str, ...], tuple[str, str]], _Share] = field(default_factory=dict)
    requests: dict[tuple[str, ...], float] = field(default_factory=dict)
    op_errors: dict[tuple[str, str], RateBaseline] = field(default_factory=dict)
    latency: dict[tuple[str, str], StudentTBaseline] = field(default_factory=dict)
    request_latency: dict[tuple[str, ...], StudentTBaseline] = field(default_factory=dict)
    error_after: dict[str, RateBaseline] = field(default_factory=dict)
    pooled_error_after: RateBaseline = field(default_factory=RateBaseline)
    windows: float = 0.0

    def decay(self, factor: float) -> None:
        for table in (self.calls, self.presence, self.op_errors, self.latency, self.request_latency, self.error_after):
            for b in table.values():
                b.decay(factor)
        for table in (self.visits, self.requests):
            for key in table:
                table[key] *= factor
        self.pooled_error_after.decay(factor)
        self.windows *= factor


@dataclass(frozen=True)
class _Counts:
    """A window's sums of per-trace facts."""

    traces: int
    visits: dict[tuple[str, str], int]
    typed_visits: dict[tuple[tuple[str, ...], tuple[str, str]], int]
    calling: dict[tuple[tuple[str, ...], tuple[str, str], str], int]
    requests: dict[tuple[str, ...], int]
    presence: dict[tuple[str, ...], dict[tuple[str, str], int]]
    answered: dict[str, int]
    error_after: dict[str, int]
    error_visits: dict[tuple[str, str], int]
    own: dict[tuple[str, str], list[float]]
    examples: dict[tuple, list[str]]


def _count(shape: WindowShape, limit: int) -> _Counts:
    visits: dict = defaultdict(int)
    typed_visits: dict = defaultdict(int)
    calling: dict = defaultdict(int)
    requests: dict = defaultdict(int)
    presence: dict = defaultdict(lambda: defaultdict(int))
    answered: dict = defaultdict(int)
    error_after: dict = defaultdict(int)
    error_visits: dict = defaultdict(int)
    own: dict = defaultdict(list)
    examples: dict = defaultdict(list)

    def example(key, trace_id):
        ids = examples[key]
        if len(ids) < limit and trace_id not in ids:
            ids.append(trace_id)

    for t in shape.traces:
        requests[t.entry] += 1
        for op in {(v.service, v.operation) for v in t.visits}:
            presence[t.entry][op] += 1
        for v in t.visits:
            op = (v.service, v.operation)
            visits[op] += 1
            typed_visits[(t.entry, op)] += 1
            own[op].append(v.own_ms)
            example(op, t.trace_id)
            for callee in {c.callee for c in v.calls}:
                calling[(t.entry, op, callee)] += 1
            for c in v.calls:
                answered[c.callee] += 1
            if v.error_origins:
                error_visits[op] += 1
            if v.error_after is not None:
                error_after[v.error_after] += 1
                example(("error_after", v.error_after), t.trace_id)
    return _Counts(len(shape.traces), dict(visits), dict(typed_visits), dict(calling), dict(requests),
                   {req: dict(ops) for req, ops in presence.items()}, dict(answered), dict(error_after),
                   dict(error_visits), dict(own), dict(examples))


class ShapeJudge:
    """Judges a window's shape against the baselines and then adds it to them."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.base = ShapeBaselines()
        self._last: tuple | None = None

    def decay(self, factor: float) -> None:
        self.base.decay(factor)

    # -- latency models --------------------------------------------------------------------
    def _tail(self, dist: StudentTBaseline | None, y: float, min_n: float) -> float:
        p = self.policy
        if dist is None or dist.n < min_n:
            return 1.0
        return dist.tail(y, p.latency_tail_dof, p.visit_prior_scale, p.visit_prior_n)

    def _absorb_dist(self, table: dict, key, y: float, weight: float, tail: float) -> None:
        p = self.policy
        if surprise_of(tail) >= p.absorb_surprise:
            return
        table.setdefault(key, StudentTBaseline()).absorb(y, weight, p.latency_tail_dof, p.visit_prior_scale, p.visit_prior_n)

    def _anomalous(self, trace: Trace) -> bool:
        p = self.policy
        limit = surprise_of(p.trace_anomaly_alpha)
        if trace.duration_ms is not None:
            tail = self._tail(self.base.request_latency.get(trace.entry), math.log1p(trace.duration_ms), p.min_baseline_visits)
            if surprise_of(tail) >= limit:
                return True
        for v in trace.visits:
            if v.error_origins:
                rate = self.base.op_errors.get((v.service, v.operation), RateBaseline())
                if self.base.windows < p.min_baseline_windows:
                    continue
                _, s = rate.judge(1, 1, p.error_prior_rate, p.error_prior_shape)
                if s >= limit:
                    return True
        return False

    def judge(self, shape: WindowShape) -> list[ShapeEvidence]:
        p = self.policy
        counts = _count(shape, p.example_traces)
        out: list[ShapeEvidence] = []
        if self.base.windows < p.min_baseline_windows:
            self._last = (counts, [])
            return out
        ex = counts.examples

        # Call pattern, per request type (what a service calls depends on what it is asked): the
        # visits of the op that call the callee at least once, against that share in the baseline;
        # per (op, callee), the most surprising request type, Bonferroni over the types.
        per_key: dict = defaultdict(list)
        for (req, op), n in counts.typed_visits.items():
            callees = {c for (r, o, c) in counts.calling if (r, o) == (req, op)}
            callees |= {c for (r, o, c) in self.base.calls if (r, o) == (req, op)}
            for callee in callees:
                k = counts.calling.get((req, op, callee), 0)
                base = self.base.calls.get((req, op, callee), _Share())
                expected, s1 = base.judge(k, n, self.base.visits.get((req, op), 0.0), p.share_prior_weight, p.share_max_weight)
                per_key[(*op, callee)].append((s1, k / n, expected))
        for key in sorted(per_key):
            s1, value, expected = max(per_key[key])
            s1 = max(0.0, s1 - math.log10(len(per_key[key])))
            out.append(ShapeEvidence(key[0], CALL_PATTERN, key, value, expected, s1, tuple(ex.get(key[:2], ()))))

        # Operation presence: per request type, the traces that visit the op, against the type's
        # baseline share; the most surprising type counts, Bonferroni over the types.
        if counts.traces:
            ops = {op for per in counts.presence.values() for op in per}
            ops |= {op for (req, op) in self.base.presence if req in counts.requests}
            for op in sorted(ops):
                best, detail = 0.0, None
                types = [req for req in sorted(counts.requests) if (req, op) in self.base.presence or op in counts.presence.get(req, {})]
                for req in types:
                    n = counts.requests[req]
                    k = counts.presence.get(req, {}).get(op, 0)
                    base = self.base.presence.get((req, op), _Share())
                    expected, s1 = base.judge(k, n, self.base.requests.get(req, 0.0), p.share_prior_weight, p.share_max_weight)
                    if s1 >= best:
                        best, detail = s1, (k / n, expected)
                if detail is not None:
                    best = max(0.0, best - math.log10(len(types)))
                    out.append(ShapeEvidence(op[0], OPERATION_RATE, op, detail[0], detail[1], best, tuple(ex.get(op, ()))))

        # Operation latency: the window's mean of log(1 + own ms) over the op's visits.
        for op in sorted(counts.own):
            dist = self.base.latency.get(op)
            y = _mean_log(counts.own[op])
            tail = 1.0 if dist is None or dist.n < p.min_baseline_windows else dist.tail(
                y, p.latency_tail_dof, p.latency_prior_scale, p.latency_prior_windows)
            typical = None if dist is None else dist.typical_ms()
            out.append(ShapeEvidence(op[0], OPERATION_LATENCY, op, math.expm1(y), typical, surprise_of(tail), tuple(ex.get(op, ()))))

        # Trace spectrum.
        anomalous = {t.trace_id for t in shape.traces if self._anomalous(t)}
        n_all, f_all = len(shape.traces), len(anomalous)
        if f_all:
            on: dict = defaultdict(set)
            for t in shape.traces:
                for v in t.visits:
                    on[(v.service, v.operation)].add(t.trace_id)
            for op in sorted(on):
                n = len(on[op])
                ef = len(on[op] & anomalous)
                if ef == 0:
                    continue
                from scipy import stats  # here, not at import (see above)

                s = surprise_of(stats.hypergeom.sf(ef - 1, n_all, f_all, n))
                ochiai = ef / math.sqrt(f_all * n)
                out.append(ShapeEvidence(op[0], TRACE_SPECTRUM, op, ochiai, None, s, tuple(sorted(on[op] & anomalous)[: p.example_traces])))

        # Errors right after a call: per callee, per call answered.
        pr, ps = self.base.pooled_error_after.posterior(p.error_prior_rate, p.error_prior_shape)
        for callee in sorted(counts.error_after):
            k = counts.error_after[callee]
            n = counts.answered.get(callee, k)
            expected, s = self.base.error_after.get(callee, RateBaseline()).judge(k, n, pr / ps, p.error_prior_shape)
            out.append(ShapeEvidence(callee, ERROR_AFTER_CALL, (callee,), k, expected, s, tuple(ex.get(("error_after", callee), ()))))
        self._last = (counts, out)
        return out

    def absorb(self, shape: WindowShape, weight: float) -> None:
        """Adds the window to the baselines; a key judged affected stays out of its own."""
        p = self.policy
        counts = _count(shape, 0)
        affected = {(e.signal, e.key) for e in self._last[1] if e.surprise >= p.absorb_surprise} if self._last else set()
        for (req, op), n in counts.typed_visits.items():
            callees = {c for (r, o, c) in counts.calling if (r, o) == (req, op)}
            callees |= {c for (r, o, c) in self.base.calls if (r, o) == (req, op)}
            if any((CALL_PATTERN, (*op, c)) in affected for c in callees):
                continue
            self.base.visits[(req, op)] = self.base.visits.get((req, op), 0.0) + weight * n
            for c in callees:
                self.base.calls.setdefault((req, op, c), _Share()).absorb(counts.calling.get((req, op, c), 0), weight)
        for op, n in counts.visits.items():
            self.base.op_errors.setdefault(op, RateBaseline()).absorb(counts.error_visits.get(op, 0), n, weight)
        for req, n in counts.requests.items():
            ops = set(counts.presence.get(req, {})) | {op for (r, op) in self.base.presence if r == req}
            if any((OPERATION_RATE, op) in affected for op in ops):
                continue
            self.base.requests[req] = self.base.requests.get(req, 0.0) + weight * n
            for op in ops:
                self.base.presence.setdefault((req, op), _Share()).absorb(counts.presence.get(req, {}).get(op, 0), weight)
        for op, values in counts.own.items():
            if (OPERATION_LATENCY, op) not in affected:
                self.base.latency.setdefault(op, StudentTBaseline()).absorb(
                    _mean_log(values), weight, p.latency_tail_dof, p.latency_prior_scale, p.latency_prior_windows)
        for t in shape.traces:
            if t.duration_ms is not None:
                y = math.log1p(t.duration_ms)
                dist = self.base.request_latency.get(t.entry)
                self._absorb_dist(self.base.request_latency, t.entry, y, weight, self._tail(dist, y, p.min_baseline_visits))
        for callee, n in counts.answered.items():
            if (ERROR_AFTER_CALL, (callee,)) not in affected:
                self.base.error_after.setdefault(callee, RateBaseline()).absorb(counts.error_after.get(callee, 0), n, weight)
        self.base.pooled_error_after.absorb(sum(counts.error_after.values()), sum(counts.answered.values()), weight)
        self.base.windows += weight
