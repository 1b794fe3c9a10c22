package io.stormwatch.flink.traces;

import java.util.Arrays;

/**
 * A mergeable latency histogram on fixed log-scale buckets: bucket i holds values in
 * (GAMMA^(i-1), GAMMA^i] ms, GAMMA = 1.02, so any quantile read back is within 1 % of a value of
 * that rank. Bucket 0 holds everything at or below {@link #MIN_MS}. Fixed buckets make histograms of
 * different windows, subtasks and traces add up exactly (two-phase aggregation), unlike exact
 * percentiles, which need every value.
 *
 * Stored sparse, as SQL reads it: ARRAY<BIGINT> of (bucket index, count) pairs in index order.
 */
public final class LogHistogram {
    public static final double GAMMA = 1.02;
    public static final double MIN_MS = 0.001;
    private static final double LOG_GAMMA = Math.log(GAMMA);
    private static final int MAX_INDEX = 4000; // GAMMA^4000 ms: far beyond any span

    private int[] index = new int[4];
    private long[] count = new long[4];
    private int size;

    public static int bucketOf(double ms) {
        if (!(ms > MIN_MS)) {
            return 0;
        }
        int i = (int) Math.ceil(Math.log(ms / MIN_MS) / LOG_GAMMA);
        return Math.max(1, Math.min(i, MAX_INDEX));
    }

    /** A value representing bucket i: the geometric middle of its bounds. */
    public static double valueOf(int i) {
        if (i <= 0) {
            return 0.0;
        }
        return MIN_MS * Math.pow(GAMMA, i - 0.5);
    }

    public void add(double ms) {
        add(bucketOf(ms), 1);
    }

    public void add(int bucket, long n) {
        int at = Arrays.binarySearch(index, 0, size, bucket);
        if (at >= 0) {
            count[at] += n;
            return;
        }
        at = -at - 1;
        if (size == index.length) {
            index = Arrays.copyOf(index, size * 2);
            count = Arrays.copyOf(count, size * 2);
        }
        System.arraycopy(index, at, index, at + 1, size - at);
        System.arraycopy(count, at, count, at + 1, size - at);
        index[at] = bucket;
        count[at] = n;
        size++;
    }

    public void merge(LogHistogram other) {
        for (int i = 0; i < other.size; i++) {
            add(other.index[i], other.count[i]);
        }
    }

    /** Adds the pairs of a sparse array (as {@link #toPairs()} writes it); null adds nothing. */
    public void mergePairs(Long[] pairs) {
        if (pairs == null) {
            return;
        }
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            if (pairs[i] != null && pairs[i + 1] != null) {
                add(pairs[i].intValue(), pairs[i + 1]);
            }
        }
    }

    public long total() {
        long n = 0;
        for (int i = 0; i < size; i++) {
            n += count[i];
        }
        return n;
    }

    /**
     * The q-quantile (0..1) by linear interpolation between closest ranks at q*(n-1), as Flink's
     * PERCENTILE does on exact values, each value taken as its bucket's representative; null if empty.
     */
    public Double quantile(double q) {
        long n = total();
        if (n == 0) {
            return null;
        }
        double pos = q * (n - 1);
        long lo = (long) Math.floor(pos);
        double frac = pos - lo;
        double a = valueAtRank(lo);
        double b = frac > 0 ? valueAtRank(lo + 1) : a;
        return a + (b - a) * frac;
    }

    private double valueAtRank(long rank) {
        long seen = 0;
        for (int i = 0; i < size; i++) {
            seen += count[i];
            if (rank < seen) {
                return valueOf(index[i]);
            }
        }
        return valueOf(index[size - 1]);
    }

    public Long[] toPairs() {
        Long[] pairs = new Long[size * 2];
        for (int i = 0; i < size; i++) {
            pairs[2 * i] = (long) index[i];
            pairs[2 * i + 1] = count[i];
        }
        return pairs;
    }

    public static LogHistogram ofPairs(Long[] pairs) {
        LogHistogram h = new LogHistogram();
        h.mergePairs(pairs);
        return h;
    }
}
