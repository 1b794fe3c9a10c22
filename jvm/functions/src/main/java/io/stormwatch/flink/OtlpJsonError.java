package io.stormwatch.flink;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JacksonException;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.table.functions.ScalarFunction;

import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/**
 * OTLP_JSON_ERROR(payload, 'resourceSpans' | 'resourceMetrics'): why a message is not an OTLP JSON
 * export request, or NULL when it is one, down to the objects and arrays the topic's table reads.
 *
 * Flink's JSON format with ignore-parse-errors reads a scalar where an array belongs as NULL, and an
 * array where an object belongs fails the whole element: either way the spans or points under it are
 * gone without a trace. The raw reader of an OTLP JSON topic calls this once per message, so every
 * such message reaches the dead letters, saying where it breaks the shape; what could be read of it is
 * processed as usual. Scalars of the wrong type are left to the views, which judge them per span.
 */
public class OtlpJsonError extends ScalarFunction {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The containers of one JSON object: field -> shape of the object it holds, or of each element of the array. */
    private static final class Shape {
        final Map<String, Shape> objects = new LinkedHashMap<>();
        final Map<String, Shape> arrays = new LinkedHashMap<>();
        /** Arrays of scalars: only the array itself is checked. */
        final Set<String> scalarArrays = new LinkedHashSet<>();

        Shape object(String field, Shape shape) {
            objects.put(field, shape);
            return this;
        }

        Shape array(String field, Shape element) {
            arrays.put(field, element);
            return this;
        }

        Shape scalars(String field) {
            scalarArrays.add(field);
            return this;
        }
    }

    private static final Map<String, Shape> REQUESTS = new LinkedHashMap<>();

    static {
        Shape attribute = new Shape().object("value", new Shape());
        Shape resource = new Shape().array("attributes", attribute);
        Shape span = new Shape().array("attributes", attribute).object("status", new Shape())
                .array("links", new Shape());
        REQUESTS.put("resourceSpans", new Shape().object("resource", resource)
                .array("scopeSpans", new Shape().object("scope", new Shape()).array("spans", span)));
        Shape histogram = new Shape().array("dataPoints",
                new Shape().array("attributes", attribute).scalars("bucketCounts").scalars("explicitBounds"));
        Shape points = new Shape().array("dataPoints", new Shape());
        Shape metric = new Shape().object("histogram", histogram).object("gauge", points).object("sum", points)
                .object("summary", points).object("exponentialHistogram", points);
        REQUESTS.put("resourceMetrics", new Shape().object("resource", resource)
                .array("scopeMetrics", new Shape().array("metrics", metric)));
    }

    public String eval(String payload, String requestArray, String requestName) {
        if (payload == null || payload.isEmpty()) {
            return "empty message";
        }
        JsonNode root;
        try {
            root = JSON.readTree(payload);
        } catch (JacksonException e) {
            root = null;
        }
        if (root == null || !root.isObject()) {
            return "not a JSON object (is the exporter writing otlp_proto to a topic read as otlp_json?)";
        }
        JsonNode elements = root.get(requestArray);
        if (elements == null || !elements.isArray()) {
            return "no " + requestArray + " array: not an OTLP " + requestName;
        }
        String error = elements(elements, REQUESTS.get(requestArray), requestArray);
        return error == null ? null : "not an OTLP " + requestName + ": " + error;
    }

    private static String elements(JsonNode array, Shape shape, String path) {
        for (int i = 0; i < array.size(); i++) {
            JsonNode element = array.get(i);
            String where = path + "[" + i + "]";
            if (!element.isObject()) {
                return where + " is not an object";
            }
            String error = check(element, shape, where);
            if (error != null) {
                return error;
            }
        }
        return null;
    }

    private static String check(JsonNode node, Shape shape, String path) {
        for (Map.Entry<String, Shape> field : shape.objects.entrySet()) {
            JsonNode value = node.get(field.getKey());
            if (value == null || value.isNull()) {
                continue;
            }
            String where = path + "." + field.getKey();
            if (!value.isObject()) {
                return where + " is not an object";
            }
            String error = check(value, field.getValue(), where);
            if (error != null) {
                return error;
            }
        }
        for (Map.Entry<String, Shape> field : shape.arrays.entrySet()) {
            JsonNode value = node.get(field.getKey());
            if (value == null || value.isNull()) {
                continue;
            }
            String where = path + "." + field.getKey();
            if (!value.isArray()) {
                return where + " is not an array";
            }
            String error = elements(value, field.getValue(), where);
            if (error != null) {
                return error;
            }
        }
        for (String field : shape.scalarArrays) {
            JsonNode value = node.get(field);
            if (value != null && !value.isNull() && !value.isArray()) {
                return path + "." + field + " is not an array";
            }
        }
        return null;
    }
}
