package io.stormwatch.flink.traces;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The first phase of the window aggregation: every per-trace fact added to the accumulator of its
 * entity (edge, service, error break, latency stage) and its slide bucket [b, b + slide). A bucket is
 * flushed as one partial row per entity once no fact can fall into it any more; Flink SQL then merges
 * the partials of a window's buckets (sliding and tumbling windows both are unions of whole buckets).
 * Counts and sums add, histograms merge, examples keep the smallest trace id: all exact under merging.
 */
public final class Partials {
    public enum Kind { EDGE, SERVICE, BREAK, STAGE, INSTANCE }

    // Positions in Partial.n / Partial.d per kind (the SQL views name them: sql/views/trace_partials.sql).
    public static final int E_CALLS = 0, E_CLIENT_ERRORS = 1, E_SERVER_ERRORS = 2, E_RETRIES = 3;
    public static final int S_SPANS = 0, S_SERVER_SPANS = 1, S_ERRORS = 2, S_ORIGINS = 3, S_PROPAGATED = 4,
            S_ABSORBED = 5, S_SURFACED = 6, S_INBOUND_CALLS = 7, S_ORPHANS = 8, S_SELF_PARENTS = 9;
    public static final int S_SELF_MS = 0, S_INBOUND_GAP_MS = 1;
    public static final int G_DURATION_MS = 0, G_SELF_MS = 1;
    public static final int I_CALLS = 0, I_ERRORS = 1;

    private static final int[] LONGS = {4, 10, 1, 1, 2};
    private static final int[] DOUBLES = {1, 2, 0, 2, 0};

    /** One entity's accumulator in one bucket. */
    public static final class Partial {
        public final Kind kind;
        public final String k1, k2, k3;
        public final boolean flag;
        public final long bucketStartMs;
        public final long[] n;
        public final double[] d;
        public final LogHistogram h1 = new LogHistogram();
        public final LogHistogram h2 = new LogHistogram();
        /** Edges and instances: calls at or under each configured latency bound (cumulative, as `le` buckets). */
        public final long[] b;
        public String ex1, ex2;

        Partial(Kind kind, String k1, String k2, String k3, boolean flag, long bucketStartMs, int bounds) {
            this.kind = kind;
            this.k1 = k1;
            this.k2 = k2;
            this.k3 = k3;
            this.flag = flag;
            this.bucketStartMs = bucketStartMs;
            this.n = new long[LONGS[kind.ordinal()]];
            this.d = new double[DOUBLES[kind.ordinal()]];
            this.b = new long[kind == Kind.EDGE || kind == Kind.INSTANCE ? bounds : 0];
        }

        void example(String traceId) {
            if (traceId != null && (ex1 == null || traceId.compareTo(ex1) < 0)) {
                ex1 = traceId;
            }
        }

        void errorExample(String traceId) {
            if (traceId != null && (ex2 == null || traceId.compareTo(ex2) < 0)) {
                ex2 = traceId;
            }
        }

        void merge(Partial o) {
            for (int i = 0; i < n.length; i++) n[i] += o.n[i];
            for (int i = 0; i < d.length; i++) d[i] += o.d[i];
            for (int i = 0; i < b.length; i++) b[i] += o.b[i];
            h1.merge(o.h1);
            h2.merge(o.h2);
            example(o.ex1);
            errorExample(o.ex2);
        }
    }

    private final long slideMs;
    private final double[] boundsMs;
    /** bucket start -> entity key -> accumulator. */
    private final TreeMap<Long, Map<String, Partial>> buckets = new TreeMap<>();

    public Partials(long slideMs, double[] boundsMs) {
        this.slideMs = slideMs;
        this.boundsMs = boundsMs;
    }

    public long bucketOf(long timeMs) {
        return Math.floorDiv(timeMs, slideMs) * slideMs;
    }

    private Partial at(Kind kind, long timeMs, String k1, String k2, String k3, boolean flag) {
        long bucket = bucketOf(timeMs);
        String key = kind.ordinal() + "\u0000" + k1 + "\u0000" + k2 + "\u0000" + k3 + "\u0000" + flag;
        return buckets.computeIfAbsent(bucket, b -> new HashMap<>())
                .computeIfAbsent(key, k -> new Partial(kind, k1, k2, k3, flag, bucket, boundsMs.length));
    }

    /** A call from `caller` to `callee`; gapMs NaN where there is none (not CLIENT -> SERVER); `retry`
     *  when it repeats an earlier attempt of the same logical call (TraceFacts). */
    public void edge(long timeMs, String caller, String callee, boolean virtual, boolean clientError,
                     boolean serverError, double latencyMs, double gapMs, boolean retry, String traceId) {
        Partial p = at(Kind.EDGE, timeMs, caller, callee, null, virtual);
        p.n[E_CALLS]++;
        if (retry) p.n[E_RETRIES]++;
        if (clientError) p.n[E_CLIENT_ERRORS]++;
        if (serverError) p.n[E_SERVER_ERRORS]++;
        if (!Double.isNaN(gapMs)) p.d[0] += gapMs;
        p.h1.add(latencyMs);
        for (int i = 0; i < boundsMs.length; i++) {
            if (latencyMs <= boundsMs[i]) p.b[i]++;
        }
        p.example(traceId);
        if (clientError || serverError) p.errorExample(traceId);
    }

    /** The service's record of a bucket; the caller adds to its counters. */
    public Partial service(long timeMs, String service, String traceId) {
        Partial p = at(Kind.SERVICE, timeMs, service, null, null, false);
        p.example(traceId);
        return p;
    }

    public void errorBreak(long timeMs, String absorbing, String failing, String traceId) {
        Partial p = at(Kind.BREAK, timeMs, absorbing, failing, null, false);
        p.n[0]++;
        p.example(traceId);
    }

    public void stage(long timeMs, String service, String operation, String kind, double durationMs,
                      double selfMs, String traceId) {
        Partial p = at(Kind.STAGE, timeMs, service, operation, kind, false);
        p.n[0]++;
        p.d[G_DURATION_MS] += durationMs;
        p.d[G_SELF_MS] += selfMs;
        p.h1.add(durationMs);
        p.h2.add(selfMs);
        p.example(traceId);
    }

    /** A SERVER span of an instance: the per-instance RED figures the health job reads. */
    public void instanceCall(long timeMs, String service, String instance, boolean error, double latencyMs,
                             String traceId) {
        Partial p = at(Kind.INSTANCE, timeMs, service, instance, null, false);
        p.n[I_CALLS]++;
        if (error) p.n[I_ERRORS]++;
        p.h1.add(latencyMs);
        for (int i = 0; i < boundsMs.length; i++) {
            if (latencyMs <= boundsMs[i]) p.b[i]++;
        }
        p.example(traceId);
        if (error) p.errorExample(traceId);
    }

    /** Removes and returns the partials of every bucket that ends at or before `watermarkMs` + 1. */
    public List<Partial> closeUpTo(long watermarkMs) {
        List<Partial> closed = new ArrayList<>();
        Iterator<Map.Entry<Long, Map<String, Partial>>> it = buckets.entrySet().iterator();
        while (it.hasNext()) {
            Map.Entry<Long, Map<String, Partial>> e = it.next();
            if (e.getKey() + slideMs - 1 > watermarkMs) {
                break;
            }
            closed.addAll(e.getValue().values());
            it.remove();
        }
        return closed;
    }

    public boolean isEmpty() {
        return buckets.isEmpty();
    }

    /** All open partials, for a checkpoint; {@link #restore} adds them back (merging). */
    public void write(DataOutputStream out) throws IOException {
        List<Partial> all = new ArrayList<>();
        buckets.values().forEach(m -> all.addAll(m.values()));
        out.writeInt(all.size());
        for (Partial p : all) {
            out.writeInt(p.kind.ordinal());
            writeString(out, p.k1);
            writeString(out, p.k2);
            writeString(out, p.k3);
            out.writeBoolean(p.flag);
            out.writeLong(p.bucketStartMs);
            for (long v : p.n) out.writeLong(v);
            for (double v : p.d) out.writeDouble(v);
            for (long v : p.b) out.writeLong(v);
            writePairs(out, p.h1.toPairs());
            writePairs(out, p.h2.toPairs());
            writeString(out, p.ex1);
            writeString(out, p.ex2);
        }
    }

    public void restore(DataInputStream in) throws IOException {
        int count = in.readInt();
        for (int i = 0; i < count; i++) {
            Kind kind = Kind.values()[in.readInt()];
            String k1 = readString(in), k2 = readString(in), k3 = readString(in);
            boolean flag = in.readBoolean();
            long bucket = in.readLong();
            Partial p = new Partial(kind, k1, k2, k3, flag, bucket, boundsMs.length);
            for (int j = 0; j < p.n.length; j++) p.n[j] = in.readLong();
            for (int j = 0; j < p.d.length; j++) p.d[j] = in.readDouble();
            for (int j = 0; j < p.b.length; j++) p.b[j] = in.readLong();
            p.h1.mergePairs(readPairs(in));
            p.h2.mergePairs(readPairs(in));
            p.example(readString(in));
            p.errorExample(readString(in));
            at(kind, bucket, k1, k2, k3, flag).merge(p);
        }
    }

    private static void writeString(DataOutputStream out, String s) throws IOException {
        out.writeBoolean(s != null);
        if (s != null) out.writeUTF(s);
    }

    private static String readString(DataInputStream in) throws IOException {
        return in.readBoolean() ? in.readUTF() : null;
    }

    private static void writePairs(DataOutputStream out, Long[] pairs) throws IOException {
        out.writeInt(pairs.length);
        for (Long v : pairs) out.writeLong(v);
    }

    private static Long[] readPairs(DataInputStream in) throws IOException {
        Long[] pairs = new Long[in.readInt()];
        for (int i = 0; i < pairs.length; i++) pairs[i] = in.readLong();
        return pairs;
    }
}
