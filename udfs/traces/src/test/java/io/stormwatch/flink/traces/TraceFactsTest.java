package io.stormwatch.flink.traces;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What one assembled trace yields, worked out by hand for each case. Times in ms from 1,000,000 ms. */
class TraceFactsTest {
    private static final long T0 = 1_000_000L;
    private static final double[] BOUNDS = {10, 100};

    private static SpanRecord span(String trace, String id, String parent, String service, String kind,
                                   long startMs, long endMs, boolean error) {
        SpanRecord s = new SpanRecord();
        s.traceId = trace;
        s.spanId = id;
        s.parentSpanId = parent;
        s.service = service;
        s.name = "op-" + id;
        s.kind = kind;
        s.status = error ? "STATUS_CODE_ERROR" : "STATUS_CODE_UNSET";
        s.start = (T0 + startMs) * 1_000_000L;
        s.end = (T0 + endMs) * 1_000_000L;
        s.route = trace;
        return s;
    }

    /** Every partial of one bucket-wide slide (large enough to hold the whole trace), by kind and keys. */
    private static Map<String, Partials.Partial> derive(SpanRecord... records) {
        Partials partials = new Partials(3_600_000L, BOUNDS);
        TraceFacts.derive(List.of(records), partials);
        Map<String, Partials.Partial> out = new HashMap<>();
        for (Partials.Partial p : partials.closeUpTo(Long.MAX_VALUE - 1)) {
            out.put(p.kind + ":" + p.k1 + ">" + p.k2 + (p.flag ? "*" : ""), p);
        }
        return out;
    }

    @Test
    void aClientCallIntoAServerIsOneEdgeWithTheCallersLatencyAndTheGap() {
        Map<String, Partials.Partial> got = derive(
                span("t", "a", null, "web", TraceFacts.SERVER, 0, 100, false),
                span("t", "b", "a", "web", TraceFacts.CLIENT, 10, 90, true),
                span("t", "c", "b", "api", TraceFacts.SERVER, 12, 88, true),
                span("t", "d", "c", "api", "SPAN_KIND_INTERNAL", 20, 30, true));
        Partials.Partial edge = got.get("EDGE:web>api");
        assertEquals(1, edge.n[Partials.E_CALLS]);
        assertEquals(1, edge.n[Partials.E_CLIENT_ERRORS]);
        assertEquals(1, edge.n[Partials.E_SERVER_ERRORS]);
        assertEquals(4.0, edge.d[0], 1e-9); // 80 ms client - 76 ms server
        assertEquals(0, edge.b[0]);          // 80 ms: over 10 ...
        assertEquals(1, edge.b[1]);          // ... under 100
        assertEquals(1, got.get("EDGE:user>web").n[Partials.E_CALLS]);
        // api: d fails (an origin, its parent failed too: propagated), c fails because d did (propagated).
        Partials.Partial api = got.get("SERVICE:api>null");
        assertEquals(2, api.n[Partials.S_ERRORS]);
        assertEquals(1, api.n[Partials.S_ORIGINS]);
        assertEquals(2, api.n[Partials.S_PROPAGATED]);
        assertEquals(1, api.n[Partials.S_INBOUND_CALLS]);
        assertEquals(4.0, api.d[Partials.S_INBOUND_GAP_MS], 1e-9);
        // web: the CLIENT span failed, its SERVER parent did not: absorbed there, a break web -> web.
        Partials.Partial web = got.get("SERVICE:web>null");
        assertEquals(1, web.n[Partials.S_ABSORBED]);
        assertEquals(1, got.get("BREAK:web>web").n[0]);
        // Self time: 100 - 80 (web root), 80 - 76 (client), 76 - 10 (api server), 10 (internal).
        assertEquals(20.0 + 4.0, web.d[Partials.S_SELF_MS], 1e-9);
        assertEquals(66.0 + 10.0, api.d[Partials.S_SELF_MS], 1e-9);
    }

    @Test
    void overlappingChildrenCoverTheirUnionOnlyAndClippedToTheParent() {
        SpanRecord parent = span("t", "p", null, "svc", TraceFacts.SERVER, 0, 100, false);
        List<SpanRecord> kids = new ArrayList<>(List.of(
                span("t", "x", "p", "svc", "SPAN_KIND_INTERNAL", 10, 40, false),
                span("t", "y", "p", "svc", "SPAN_KIND_INTERNAL", 30, 50, false),   // overlaps x: union 10..50
                span("t", "z", "p", "svc", "SPAN_KIND_INTERNAL", 90, 130, false))); // clipped to 90..100
        assertEquals(50.0, TraceFacts.coveredMs(parent, kids), 1e-9);
    }

    @Test
    void anUntracedClientCallGoesToAVirtualCalleeAndCopiesCountOnce() {
        SpanRecord root = span("t", "a", null, "web", TraceFacts.SERVER, 0, 50, false);
        SpanRecord db = span("t", "b", "a", "web", TraceFacts.CLIENT, 10, 20, false);
        db.callee = "postgresql";
        Map<String, Partials.Partial> got = derive(root, db, db, root);
        assertEquals(1, got.get("EDGE:web>postgresql*").n[Partials.E_CALLS]);
        assertEquals(2, got.get("SERVICE:web>null").n[Partials.S_SPANS]);
        assertEquals(1, got.get("EDGE:user>web").n[Partials.E_CALLS]);
    }

    @Test
    void orphansSelfParentsAndCyclesAreCountedWithoutLooping() {
        Map<String, Partials.Partial> got = derive(
                span("t", "o", "missing", "api", TraceFacts.SERVER, 0, 10, false),
                span("t", "s", "s", "api", TraceFacts.SERVER, 0, 10, false),
                span("t", "a", "b", "web", TraceFacts.SERVER, 0, 10, false),
                span("t", "b", "a", "api", TraceFacts.SERVER, 0, 10, false));
        Partials.Partial api = got.get("SERVICE:api>null");
        assertEquals(1, api.n[Partials.S_ORPHANS]);
        assertEquals(1, api.n[Partials.S_SELF_PARENTS]);
        // Each span of the cycle has a parent in the other service: one call each way, no root.
        assertEquals(1, got.get("EDGE:web>api").n[Partials.E_CALLS]);
        assertEquals(1, got.get("EDGE:api>web").n[Partials.E_CALLS]);
        assertNull(got.get("EDGE:user>api"));
    }

    @Test
    void aConsumersLinkToAProducerOfAnotherServiceIsACallOfTheProducersTrace() {
        SpanRecord producer = span("p", "m", null, "web", TraceFacts.PRODUCER, 0, 5, true);
        SpanRecord probe = span("c", "k", null, "billing", TraceFacts.CONSUMER, 2000, 2100, false);
        probe.probeOf = "m";
        probe.route = "p";
        Map<String, Partials.Partial> got = derive(producer, probe, probe);
        Partials.Partial edge = got.get("EDGE:web>billing");
        assertEquals(1, edge.n[Partials.E_CALLS]);
        assertEquals(1, edge.n[Partials.E_CLIENT_ERRORS]);
        assertEquals(100.0, LogHistogram.ofPairs(edge.h1.toPairs()).quantile(0.5), 1.0);
        assertEquals(T0 / 3_600_000L * 3_600_000L, edge.bucketStartMs);
        // A probe is not a span of the producer's trace.
        assertNull(got.get("SERVICE:billing>null"));
    }

    @Test
    void everyFactOfATraceIsInTheBucketOfItsEndWhereverItsSpansEnded() {
        // 10 s buckets; the trace runs from bucket 0 into bucket 2 (a slow LLM call), its link probe
        // (a consumer's span in another trace naming it) ends last, in bucket 3.
        Partials partials = new Partials(10_000L, BOUNDS);
        long b0 = T0 / 10_000L * 10_000L - T0; // bucket starts relative to T0
        SpanRecord producer = span("t", "p", "a", "orchestrator", TraceFacts.PRODUCER, b0 + 2_000, b0 + 2_001, false);
        SpanRecord probe = span("u", "k", null, "billing", TraceFacts.CONSUMER, b0 + 30_000, b0 + 31_000, false);
        probe.probeOf = "p";
        probe.route = "t";
        TraceFacts.derive(List.of(
                span("t", "a", null, "orchestrator", TraceFacts.SERVER, b0 + 1_000, b0 + 25_000, false),
                span("t", "b", "a", "orchestrator", TraceFacts.CLIENT, b0 + 1_500, b0 + 4_000, false),
                span("t", "c", "b", "llm", TraceFacts.SERVER, b0 + 1_600, b0 + 3_900, true),
                producer, probe), partials);
        List<Partials.Partial> all = partials.closeUpTo(Long.MAX_VALUE - 1);
        List<String> kinds = new ArrayList<>();
        for (Partials.Partial p : all) {
            kinds.add(p.kind + ":" + p.k1 + ">" + p.k2);
            assertEquals(T0 + b0 + 30_000, p.bucketStartMs, p.kind + " " + p.k1 + ">" + p.k2);
        }
        assertTrue(kinds.contains("EDGE:orchestrator>llm") && kinds.contains("EDGE:orchestrator>billing")
                && kinds.contains("EDGE:user>orchestrator") && kinds.contains("BREAK:orchestrator>llm"), kinds.toString());
    }

    @Test
    void aLinkToTheConsumersOwnParentIsThatCallOnlyOnce() {
        SpanRecord producer = span("t", "m", null, "web", TraceFacts.PRODUCER, 0, 5, false);
        SpanRecord consumer = span("t", "k", "m", "billing", TraceFacts.CONSUMER, 1000, 1010, false);
        consumer.links = new String[] {"t/m"};
        SpanRecord probe = span("t", "k", "m", "billing", TraceFacts.CONSUMER, 1000, 1010, false);
        probe.probeOf = "m";
        assertEquals(1, derive(producer, consumer, probe).get("EDGE:web>billing").n[Partials.E_CALLS]);
    }

    @Test
    void histogramsMergeExactlyAndReadQuantilesWithinOnePercent() {
        LogHistogram a = new LogHistogram(), b = new LogHistogram();
        for (int v = 1; v <= 1000; v++) (v % 2 == 0 ? a : b).add(v);
        a.merge(LogHistogram.ofPairs(b.toPairs()));
        assertEquals(1000, a.total());
        // Exact p50 of 1..1000 at rank 499.5 is 500.5; p95 at rank 949.05 is 950.05.
        assertEquals(500.5, a.quantile(0.5), 500.5 * 0.01);
        assertEquals(950.05, a.quantile(0.95), 950.05 * 0.01);
        assertNull(new LogHistogram().quantile(0.5));
        assertTrue(LogHistogram.bucketOf(0.0) == 0 && LogHistogram.bucketOf(-1) == 0);
    }

    @Test
    void partialsCloseWholeBucketsOnlyAndSurviveACheckpoint() throws Exception {
        Partials partials = new Partials(10_000L, BOUNDS);
        partials.errorBreak(5_000, "a", "b", "t2");
        partials.errorBreak(15_000, "a", "b", "t1");
        assertEquals(0, partials.closeUpTo(9_998).size());
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        partials.write(new java.io.DataOutputStream(bytes));
        Partials restored = new Partials(10_000L, BOUNDS);
        restored.restore(new java.io.DataInputStream(new java.io.ByteArrayInputStream(bytes.toByteArray())));
        restored.errorBreak(5_500, "a", "b", "t0");
        List<Partials.Partial> first = restored.closeUpTo(9_999);
        assertEquals(1, first.size());
        assertEquals(2, first.get(0).n[0]);
        assertEquals("t0", first.get(0).ex1);
        assertEquals(1, restored.closeUpTo(Long.MAX_VALUE - 1).size());
        assertTrue(restored.isEmpty());
    }

    @Test
    void serverSpansAreEachInstancesCalls() {
        SpanRecord ok = span("t", "a", null, "api", TraceFacts.SERVER, 0, 50, false);
        ok.instance = "api-1";
        SpanRecord failed = span("t", "b", "a", "api", TraceFacts.SERVER, 10, 15, true);
        failed.instance = "api-1";
        SpanRecord client = span("t", "c", "a", "api", TraceFacts.CLIENT, 20, 30, false);
        Partials.Partial p = derive(ok, failed, client).get("INSTANCE:api>api-1");
        assertEquals(2, p.n[Partials.I_CALLS]);
        assertEquals(1, p.n[Partials.I_ERRORS]);
        assertEquals(1, p.b[0]); // 5 ms <= 10
        assertEquals(2, p.b[1]); // both <= 100
        assertEquals("t", p.ex2);
    }

    /** web calls api twice from one span under the same name: the second attempt as given. */
    private static Partials.Partial twoAttempts(long secondStartMs, long secondEndMs, boolean firstFails) {
        return twoAttempts(secondStartMs, secondEndMs, firstFails, -1);
    }

    /** The same, the second attempt's CLIENT span with this http.request.resend_count (-1: none). */
    private static Partials.Partial twoAttempts(long secondStartMs, long secondEndMs, boolean firstFails, int resends) {
        SpanRecord first = span("t", "b1", "a", "web", TraceFacts.CLIENT, 10, 20, firstFails);
        SpanRecord second = span("t", "b2", "a", "web", TraceFacts.CLIENT, secondStartMs, secondEndMs, false);
        first.name = second.name = "GET /answer";
        second.resendCount = resends;
        return derive(span("t", "a", null, "web", TraceFacts.SERVER, 0, 100, false),
                first, span("t", "c1", "b1", "api", TraceFacts.SERVER, 11, 19, firstFails),
                second, span("t", "c2", "b2", "api", TraceFacts.SERVER, secondStartMs + 1, secondEndMs - 1, false))
                .get("EDGE:web>api");
    }

    @Test
    void aCallRepeatedAfterAFailureIsARetryOfOneLogicalCall() {
        Partials.Partial edge = twoAttempts(25, 40, true);
        assertEquals(2, edge.n[Partials.E_CALLS]);
        assertEquals(1, edge.n[Partials.E_RETRIES]);
    }

    @Test
    void aHedgedCallStartedWhileTheFirstIsInFlightIsARetry() {
        Partials.Partial edge = twoAttempts(15, 40, false);
        assertEquals(2, edge.n[Partials.E_CALLS]);
        assertEquals(1, edge.n[Partials.E_RETRIES]);
    }

    @Test
    void aCallRepeatedAfterASuccessIsAnotherLogicalCall() {
        Partials.Partial edge = twoAttempts(25, 40, false);
        assertEquals(2, edge.n[Partials.E_CALLS]);
        assertEquals(0, edge.n[Partials.E_RETRIES]);
    }

    @Test
    void aResendCountOfZeroIsAFirstTryWhateverCameBefore() {
        // A loop over items whose previous item failed: the client says this request is new.
        Partials.Partial edge = twoAttempts(25, 40, true, 0);
        assertEquals(2, edge.n[Partials.E_CALLS]);
        assertEquals(0, edge.n[Partials.E_RETRIES]);
    }

    @Test
    void aResendAfterASuccessIsARedirectNotARetry() {
        assertEquals(0, twoAttempts(25, 40, false, 1).n[Partials.E_RETRIES]);
        assertEquals(1, twoAttempts(25, 40, true, 1).n[Partials.E_RETRIES]);
    }

    @Test
    void aResendWhoseEarlierAttemptsWereNotExportedIsStillARetry() {
        SpanRecord root = span("t", "a", null, "web", TraceFacts.SERVER, 0, 100, false);
        SpanRecord resent = span("t", "b2", "a", "web", TraceFacts.CLIENT, 25, 40, false);
        resent.resendCount = 2;
        Partials.Partial edge = derive(root, resent, span("t", "c2", "b2", "api", TraceFacts.SERVER, 26, 39, false))
                .get("EDGE:web>api");
        assertEquals(1, edge.n[Partials.E_CALLS]);
        assertEquals(1, edge.n[Partials.E_RETRIES]);
        SpanRecord first = span("t", "b1", "a", "web", TraceFacts.CLIENT, 25, 40, false);
        first.resendCount = 0;
        assertEquals(0, derive(root, first, span("t", "c1", "b1", "api", TraceFacts.SERVER, 26, 39, false))
                .get("EDGE:web>api").n[Partials.E_RETRIES]);
    }

    @Test
    void retriesOfAnUntracedCalleeAndCallsOfAnotherNameAreTold() {
        SpanRecord root = span("t", "a", null, "web", TraceFacts.SERVER, 0, 100, false);
        SpanRecord q1 = span("t", "q1", "a", "web", TraceFacts.CLIENT, 10, 20, true);
        SpanRecord q2 = span("t", "q2", "a", "web", TraceFacts.CLIENT, 30, 40, true);
        SpanRecord q3 = span("t", "q3", "a", "web", TraceFacts.CLIENT, 50, 60, false);
        SpanRecord other = span("t", "q4", "a", "web", TraceFacts.CLIENT, 70, 80, false);
        for (SpanRecord q : List.of(q1, q2, q3, other)) q.callee = "postgresql";
        q1.name = q2.name = q3.name = "SELECT orders";
        other.name = "SELECT users";
        Partials.Partial edge = derive(root, q1, q2, q3, other).get("EDGE:web>postgresql*");
        assertEquals(4, edge.n[Partials.E_CALLS]);
        assertEquals(2, edge.n[Partials.E_RETRIES]);
        assertEquals(0, derive(root, q1).get("EDGE:user>web").n[Partials.E_RETRIES]);
    }
}
