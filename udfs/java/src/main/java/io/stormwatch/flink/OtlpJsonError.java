package io.stormwatch.flink;

import org.apache.flink.table.functions.ScalarFunction;

/**
 * OTLP_JSON_ERROR(payload, 'resourceSpans' | 'resourceMetrics', request name): why a message is not an
 * OTLP JSON export request, or NULL when it is one, down to the objects and arrays the topic's table reads.
 *
 * Flink's JSON format with ignore-parse-errors reads a scalar where an array belongs as NULL, and an
 * array where an object belongs fails the whole element: either way the points under it are gone without
 * a trace. The raw reader of an OTLP JSON topic (the health job's, for otlp_metrics) calls this once per
 * message, so every such message reaches the dead letters, saying where it breaks the shape; what could
 * be read of it is processed as usual. The shape and its check are {@link OtlpJson}'s, which the otlp
 * format reading otlp_spans shares. Scalars of the wrong type are left to the views, which judge them.
 */
public class OtlpJsonError extends ScalarFunction {
    public String eval(String payload, String requestArray, String requestName) {
        return OtlpJson.walk(payload, requestArray, requestName, OtlpJson.NOBODY).reason;
    }
}
