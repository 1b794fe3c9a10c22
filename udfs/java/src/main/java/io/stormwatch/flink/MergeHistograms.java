package io.stormwatch.flink;

import org.apache.flink.table.functions.AggregateFunction;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * MERGE_HISTOGRAMS(h): the sum of sparse log-scale histograms (LogHistogram's (bucket, count) pairs)
 * over a group: the second phase of the span path's window aggregation (sql/jobs/spans.sql).
 */
public class MergeHistograms extends AggregateFunction<Long[], MergeHistograms.Acc> {
    public static class Acc {
        public Map<Long, Long> counts = new HashMap<>();
    }

    @Override
    public Acc createAccumulator() {
        return new Acc();
    }

    public void accumulate(Acc acc, Long[] pairs) {
        if (pairs == null) return;
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            if (pairs[i] != null && pairs[i + 1] != null) acc.counts.merge(pairs[i], pairs[i + 1], Long::sum);
        }
    }

    public void merge(Acc acc, Iterable<Acc> others) {
        for (Acc o : others) o.counts.forEach((k, v) -> acc.counts.merge(k, v, Long::sum));
    }

    @Override
    public Long[] getValue(Acc acc) {
        TreeMap<Long, Long> sorted = new TreeMap<>(acc.counts);
        Long[] pairs = new Long[sorted.size() * 2];
        int i = 0;
        for (Map.Entry<Long, Long> e : sorted.entrySet()) {
            pairs[i++] = e.getKey();
            pairs[i++] = e.getValue();
        }
        return pairs;
    }

}
