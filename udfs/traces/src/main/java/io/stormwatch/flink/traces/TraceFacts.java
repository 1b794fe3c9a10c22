package io.stormwatch.flink.traces;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Everything the span path derives from one assembled trace, in one pass, added to the window
 * partials (the definitions reference/trace_windows.py and tests/integration/test_topology.py spell out
 * independently):
 * <ul>
 *   <li>time: every fact of a trace is placed at the trace's end, the latest end of its records (spans,
 *       copies and the link probes naming its spans), so a window holds the traces that ended in it:
 *       a window can close once its traces are quiet, however long some trace ran before it (a trace the
 *       assembler held longer, see {@link TraceAssembler}, is placed later: when it was done, less the
 *       quiet time);</li>
 *   <li>copies of a span (same span id: exporters retry) count once, the first that arrived;</li>
 *   <li>edges: a span whose parent is in another service is a call parent service -> its service
 *       (CLIENT -> SERVER, and SERVER -> SERVER or CLIENT -> CLIENT through uninstrumented hops); a
 *       root is called by `user` (not a CONSUMER root with links: its callers are the producers it
 *       links to); a CLIENT span with no child calls a virtual callee named by its attributes; a
 *       CONSUMER span's link to a PRODUCER span of another service (not its own parent) is a call
 *       producer -> consumer;</li>
 *   <li>retries: the calling span of a call is its *attempt*: the parent when it is a CLIENT span, else
 *       the child (a hop through an uninstrumented proxy), and the CLIENT span itself for a call to a
 *       virtual callee. Attempts with the same parent span, the same name and the same callee are
 *       attempts of one logical call; one is a *retry* when an earlier one of its call (by start, then
 *       span id) had failed or was still in flight when it started (a hedged call). Calls repeated
 *       after success (a loop over items) are not retries. Where the attempt carries the semantic
 *       conventions' `http.request.resend_count`, that decides: 0 is a first try (whatever came
 *       before it), more is a retry unless an earlier attempt of its call is in the trace and had
 *       succeeded before it started (a redirect); so a retry whose earlier attempts were not exported
 *       still counts. Root and link edges have none. An edge's logical calls are its calls less its
 *       retries;</li>
 *   <li>error classes: an error span is an origin when none of its children failed; propagated when
 *       its parent failed too, absorbed when it did not (a break, absorbing -> failing service),
 *       surfaced when it is a root;</li>
 *   <li>self time: duration minus the union of the children's intervals clipped to the span;</li>
 *   <li>per instance, its SERVER spans: calls, errors, latency (what the health job scores);</li>
 *   <li>orphans (the parent never came) and self-parents counted. Every step pairs a span with its
 *       parent only, so a cycle of parent links cannot loop.</li>
 * </ul>
 */
public final class TraceFacts {
    public static final String SERVER = "SPAN_KIND_SERVER", CLIENT = "SPAN_KIND_CLIENT",
            PRODUCER = "SPAN_KIND_PRODUCER", CONSUMER = "SPAN_KIND_CONSUMER";

    private TraceFacts() {}

    /** @param records the trace's spans and the link probes naming its spans, in arrival order */
    public static void derive(List<SpanRecord> records, Partials out) {
        derive(records, out, Long.MIN_VALUE);
    }

    /**
     * @param records the trace's spans and the link probes naming its spans, in arrival order
     * @param notBeforeMs the earliest time its facts may be placed at (the assembler's: when the trace was
     *        done, less the quiet time): a trace done later than its end's quiet time (waiting for its
     *        root, or for consumers) is placed there
     */
    public static void derive(List<SpanRecord> records, Partials out, long notBeforeMs) {
        Map<String, SpanRecord> byId = new LinkedHashMap<>();
        Map<String, SpanRecord> probes = new LinkedHashMap<>();
        long t = notBeforeMs;
        for (SpanRecord r : records) {
            t = Math.max(t, r.endMs());
            if (r.probeOf == null) {
                byId.putIfAbsent(r.spanId, r);
            } else {
                probes.putIfAbsent(r.traceId + "/" + r.spanId + "/" + r.probeOf, r);
            }
        }
        Map<String, List<SpanRecord>> children = new HashMap<>();
        Set<String> failingChild = new HashSet<>();
        for (SpanRecord s : byId.values()) {
            if (s.parentSpanId != null && !s.selfParent()) {
                children.computeIfAbsent(s.parentSpanId, k -> new ArrayList<>()).add(s);
                if (s.error()) failingChild.add(s.parentSpanId);
            }
        }
        Set<String> retries = retries(byId, children);
        for (SpanRecord s : byId.values()) {
            SpanRecord parent = s.parentSpanId == null || s.selfParent() ? null : byId.get(s.parentSpanId);
            double duration = s.durationMs();
            double self = Math.max(0.0, duration - coveredMs(s, children.get(s.spanId)));
            boolean error = s.error();

            Partials.Partial svc = out.service(t, s.service, s.traceId);
            svc.n[Partials.S_SPANS]++;
            if (SERVER.equals(s.kind)) {
                svc.n[Partials.S_SERVER_SPANS]++;
                svc.h1.add(duration);
                out.instanceCall(t, s.service, s.instance == null ? "unknown" : s.instance, error, duration, s.traceId);
            }
            if (error) {
                svc.n[Partials.S_ERRORS]++;
                if (!failingChild.contains(s.spanId)) svc.n[Partials.S_ORIGINS]++;
                if (parent != null && parent.error()) svc.n[Partials.S_PROPAGATED]++;
                if (parent != null && !parent.error()) svc.n[Partials.S_ABSORBED]++;
                if (s.isRoot()) svc.n[Partials.S_SURFACED]++;
            }
            if (s.parentSpanId != null && !s.selfParent() && parent == null) svc.n[Partials.S_ORPHANS]++;
            if (s.selfParent()) svc.n[Partials.S_SELF_PARENTS]++;
            svc.d[Partials.S_SELF_MS] += self;

            out.stage(t, s.service, s.name, s.kind, duration, self, s.traceId);
            if (error && parent != null && !parent.error()) {
                out.errorBreak(t, parent.service, s.service, s.traceId);
            }

            if (parent != null && !parent.service.equals(s.service)) {
                boolean rpc = CLIENT.equals(parent.kind);
                double gap = rpc && SERVER.equals(s.kind) ? Math.max(parent.durationMs() - duration, 0.0) : Double.NaN;
                boolean retry = !retries.isEmpty() && retries.contains(attemptKey(rpc ? parent : s, s.service));
                out.edge(t, parent.service, s.service, false, parent.error(), error,
                        rpc ? parent.durationMs() : duration, gap, retry, s.traceId);
                if (!Double.isNaN(gap)) {
                    Partials.Partial callee = out.service(t, s.service, s.traceId);
                    callee.n[Partials.S_INBOUND_CALLS]++;
                    callee.d[Partials.S_INBOUND_GAP_MS] += gap;
                }
            }
            if (s.isRoot() && !(CONSUMER.equals(s.kind) && s.hasLinks())) {
                out.edge(t, "user", s.service, false, false, error, duration, Double.NaN, false, s.traceId);
            }
            if (CLIENT.equals(s.kind) && !children.containsKey(s.spanId)) {
                String callee = s.callee == null ? "unknown" : s.callee;
                out.edge(t, s.service, callee, true, error, false, duration, Double.NaN,
                        !retries.isEmpty() && retries.contains(attemptKey(s, callee)), s.traceId);
            }
        }
        for (SpanRecord c : probes.values()) {
            SpanRecord producer = byId.get(c.probeOf);
            boolean ownParent = producer != null && producer.traceId.equals(c.traceId)
                    && c.probeOf.equals(c.parentSpanId);
            if (producer != null && PRODUCER.equals(producer.kind) && !producer.service.equals(c.service) && !ownParent) {
                out.edge(t, producer.service, c.service, false, producer.error(), c.error(),
                        c.durationMs(), Double.NaN, false, c.traceId);
            }
        }
    }

    private static String attemptKey(SpanRecord attempt, String callee) {
        return attempt.spanId + "\u0000" + callee;
    }

    /** The attempts (attemptKey) that are retries: see the class comment. */
    static Set<String> retries(Map<String, SpanRecord> byId, Map<String, List<SpanRecord>> children) {
        Map<String, Map<String, SpanRecord>> calls = new HashMap<>();
        for (SpanRecord s : byId.values()) {
            SpanRecord parent = s.parentSpanId == null || s.selfParent() ? null : byId.get(s.parentSpanId);
            SpanRecord attempt;
            String callee;
            if (parent != null && !parent.service.equals(s.service)) {
                attempt = CLIENT.equals(parent.kind) ? parent : s;
                callee = s.service;
            } else if (CLIENT.equals(s.kind) && !children.containsKey(s.spanId)) {
                attempt = s;
                callee = s.callee == null ? "unknown" : s.callee;
            } else {
                continue;
            }
            if (attempt.parentSpanId == null || attempt.selfParent()) continue;
            calls.computeIfAbsent(attempt.parentSpanId + "\u0000" + attempt.name + "\u0000" + callee,
                    k -> new LinkedHashMap<>()).putIfAbsent(attempt.spanId, attempt);
        }
        Set<String> retries = new HashSet<>();
        for (Map.Entry<String, Map<String, SpanRecord>> call : calls.entrySet()) {
            Map<String, SpanRecord> byAttempt = call.getValue();
            if (byAttempt.size() < 2 && byAttempt.values().iterator().next().resendCount <= 0) continue;
            String callee = call.getKey().substring(call.getKey().lastIndexOf('\u0000') + 1);
            List<SpanRecord> attempts = new ArrayList<>(byAttempt.values());
            attempts.sort((a, b) -> a.start != b.start ? Long.compare(a.start, b.start) : a.spanId.compareTo(b.spanId));
            boolean earlier = false, failed = false;
            long inFlightUntil = Long.MIN_VALUE;
            for (SpanRecord a : attempts) {
                boolean afterTrouble = failed || inFlightUntil > a.start;
                boolean retry = a.resendCount < 0 ? afterTrouble : a.resendCount > 0 && (!earlier || afterTrouble);
                if (retry) retries.add(attemptKey(a, callee));
                earlier = true;
                failed |= a.error();
                inFlightUntil = Math.max(inFlightUntil, a.end);
            }
        }
        return retries;
    }

    /** The length of the union of the children's intervals clipped to the span's own, in ms. */
    static double coveredMs(SpanRecord s, List<SpanRecord> kids) {
        if (kids == null || kids.isEmpty()) {
            return 0.0;
        }
        long[][] iv = new long[kids.size()][];
        int n = 0;
        for (SpanRecord k : kids) {
            long a = Math.max(k.start, s.start), b = Math.min(k.end, s.end);
            if (b > a) iv[n++] = new long[] {a, b};
        }
        java.util.Arrays.sort(iv, 0, n, (x, y) -> Long.compare(x[0], y[0]));
        long covered = 0, reach = Long.MIN_VALUE;
        for (int i = 0; i < n; i++) {
            long a = Math.max(iv[i][0], reach), b = iv[i][1];
            if (b > a) covered += b - a;
            reach = Math.max(reach, b);
        }
        return covered / 1e6;
    }
}
