package io.stormwatch.flink;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/** OTLP_JSON_ERROR on metrics messages: the shape check is {@link OtlpJson}'s, the otlp format's (connectors/java/). */
class OtlpJsonErrorTest {
    @Test
    void otlpJsonErrorKeepsJudgingMetricsMessages() {
        OtlpJsonError f = new OtlpJsonError();
        assertNull(f.eval("{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"histogram\":{\"dataPoints\":"
                + "[{\"bucketCounts\":[1],\"explicitBounds\":[]}]}}]}]}]}", "resourceMetrics", "ExportMetricsServiceRequest"));
        assertEquals("not an OTLP ExportMetricsServiceRequest: resourceMetrics[0].scopeMetrics[0].metrics[0].histogram"
                + ".dataPoints[0].bucketCounts is not an array", f.eval("{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":"
                + "[{\"histogram\":{\"dataPoints\":[{\"bucketCounts\":3}]}}]}]}]}", "resourceMetrics", "ExportMetricsServiceRequest"));
        // Objects before arrays before arrays of scalars, whatever the message's order.
        assertEquals("not an OTLP ExportMetricsServiceRequest: resourceMetrics[0].resource is not an object",
                f.eval("{\"resourceMetrics\":[{\"scopeMetrics\":5,\"resource\":5}]}", "resourceMetrics", "ExportMetricsServiceRequest"));
        assertEquals("no resourceMetrics array: not an OTLP ExportMetricsServiceRequest",
                f.eval("{}", "resourceMetrics", "ExportMetricsServiceRequest"));
        assertEquals("empty message", f.eval("", "resourceMetrics", "ExportMetricsServiceRequest"));
    }
}
