package io.stormwatch.flink;

import io.stormwatch.flink.traces.LogHistogram;
import org.apache.flink.table.functions.ScalarFunction;

/** HISTOGRAM_QUANTILE(h, q): the q-quantile of a sparse log-scale histogram (MERGE_HISTOGRAMS); NULL if empty. */
public class HistogramQuantile extends ScalarFunction {
    public Double eval(Long[] pairs, Double q) {
        if (pairs == null || q == null) return null;
        return LogHistogram.ofPairs(pairs).quantile(q);
    }
}
