package io.stormwatch.flink;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The shape of an OTLP JSON export request (the objects and arrays stormwatch reads) and one streaming
 * walk over a message that checks it: the one place that says when a message is not OTLP JSON, and why.
 * {@code OtlpJsonError} (udfs/java/: the SQL function the health job's raw reader calls) walks with nobody
 * listening; the otlp format ({@code io.stormwatch.flink.otlp}) listens to the same walk and builds its
 * spans from it, so a message is parsed once.
 *
 * <p>Reasons. A message that is not JSON, not an object, or has no request array is not decoded at all.
 * A scalar where the shape has an object or an array breaks the shape: the walk goes on past it (what
 * stands there is read as absent, as Flink's JSON format did), and the reason names the first such place
 * in the order of a depth-first check (objects, then arrays, then arrays of scalars, each in the order
 * below), whatever order the message's fields come in.
 */
public final class OtlpJson {
    public static final String NOT_JSON = "not a JSON object (is the exporter writing otlp_proto to a topic read as otlp_json?)";
    public static final String EMPTY = "empty message";

    static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonFactory FACTORY = MAPPER.getFactory();

    private OtlpJson() {}

    /** The containers of one JSON object: field -> shape of the object it holds, or of each element of the array. */
    public static final class Shape {
        static final int OBJECT = 0, ARRAY = 1, SCALARS = 2;
        /** field -> {kind, rank}: the rank is the field's place in the check's order. */
        private final Map<String, int[]> fields = new HashMap<>();
        private final Map<String, Shape> shapes = new HashMap<>();
        /** Fields by kind, each in the order added: the check's order is objects, arrays, arrays of scalars. */
        private final List<List<String>> byKind = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
        final String name;

        public Shape(String name) {
            this.name = name;
        }

        private Shape add(String field, int kind, Shape shape) {
            fields.put(field, new int[] {kind, 0});
            if (shape != null) shapes.put(field, shape);
            byKind.get(kind).add(field);
            int rank = 0;
            for (List<String> names : byKind) {
                for (String name : names) fields.get(name)[1] = rank++;
            }
            return this;
        }

        Shape object(String field, Shape shape) {
            return add(field, OBJECT, shape);
        }

        Shape array(String field, Shape element) {
            return add(field, ARRAY, element);
        }

        /** Arrays of scalars: only the array itself is checked. */
        Shape scalars(String field) {
            return add(field, SCALARS, null);
        }
    }

    // The OTLP JSON shapes. Distinct instances per place, so a listener knows where it is by identity.
    public static final Shape VALUE = new Shape("value");
    public static final Shape ATTRIBUTE = new Shape("attribute").object("value", VALUE);
    public static final Shape RESOURCE = new Shape("resource").array("attributes", ATTRIBUTE);
    public static final Shape STATUS = new Shape("status");
    public static final Shape LINK = new Shape("link");
    public static final Shape SPAN = new Shape("span").array("attributes", ATTRIBUTE).object("status", STATUS)
            .array("links", LINK);
    public static final Shape SCOPE = new Shape("scope");
    public static final Shape SCOPE_SPANS = new Shape("scopeSpans").object("scope", SCOPE).array("spans", SPAN);
    public static final Shape RESOURCE_SPANS = new Shape("resourceSpans").object("resource", RESOURCE)
            .array("scopeSpans", SCOPE_SPANS);
    private static final Shape HISTOGRAM = new Shape("histogram").array("dataPoints",
            new Shape("dataPoint").array("attributes", ATTRIBUTE).scalars("bucketCounts").scalars("explicitBounds"));
    private static final Shape POINTS = new Shape("points").array("dataPoints", new Shape("dataPoint"));
    private static final Shape METRIC = new Shape("metric").object("histogram", HISTOGRAM).object("gauge", POINTS)
            .object("sum", POINTS).object("summary", POINTS).object("exponentialHistogram", POINTS);
    public static final Shape RESOURCE_METRICS = new Shape("resourceMetrics").object("resource", RESOURCE)
            .array("scopeMetrics", new Shape("scopeMetrics").array("metrics", METRIC));
    private static final Map<String, Shape> REQUESTS = Map.of("resourceSpans", RESOURCE_SPANS,
            "resourceMetrics", RESOURCE_METRICS);

    /** Who hears the walk: objects entered and left by shape, and every field that is not a container of the shape. */
    public interface Listener {
        void enter(Shape shape);

        void exit(Shape shape);

        /**
         * Field {@code field} of an object of {@code shape}, the parser on its value. It may read the value
         * (a container with {@code readValueAsTree}); the walk skips whatever it leaves.
         */
        void field(Shape shape, String field, JsonParser parser) throws IOException;
    }

    public static final Listener NOBODY = new Listener() {
        public void enter(Shape shape) {}

        public void exit(Shape shape) {}

        public void field(Shape shape, String field, JsonParser parser) {}
    };

    /** What a walk found: no reason (an OTLP request), a reason with the message still read, or the message unread. */
    public static final class Verdict {
        public final String reason;
        /** The message was read (its reason, if any, is a broken shape): what the listener heard stands. */
        public final boolean read;

        Verdict(String reason, boolean read) {
            this.reason = reason;
            this.read = read;
        }
    }

    /** Walks a message as the request holding {@code requestArray} ('resourceSpans' | 'resourceMetrics'). */
    public static Verdict walk(byte[] message, String requestArray, String requestName, Listener listener) {
        if (message == null || message.length == 0) {
            return new Verdict(EMPTY, false);
        }
        try (JsonParser parser = FACTORY.createParser(message)) {
            return new Walk(parser, REQUESTS.get(requestArray), requestArray, requestName, listener).root();
        } catch (IOException | RuntimeException e) {
            // Syntax, bad UTF-8, nesting or size limits: nothing of the message counts.
            return new Verdict(NOT_JSON, false);
        }
    }

    public static Verdict walk(String message, String requestArray, String requestName, Listener listener) {
        if (message == null || message.isEmpty()) {
            return new Verdict(EMPTY, false);
        }
        try (JsonParser parser = FACTORY.createParser(message)) {
            return new Walk(parser, REQUESTS.get(requestArray), requestArray, requestName, listener).root();
        } catch (IOException | RuntimeException e) {
            return new Verdict(NOT_JSON, false);
        }
    }

    /** One walk: the path to where it is, and the first broken place by the check's order. */
    private static final class Walk {
        private final JsonParser p;
        private final Shape request;
        private final String array, requestName;
        private final Listener listener;
        // The path: per level a field name (index -1) or an array index; `keys` the order of that level.
        private String[] names = new String[16];
        private int[] indexes = new int[16];
        private int[] keys = new int[16];
        private int depth;
        private int[] brokenKey;
        private String broken;

        Walk(JsonParser p, Shape request, String array, String requestName, Listener listener) {
            this.p = p;
            this.request = request;
            this.array = array;
            this.requestName = requestName;
            this.listener = listener;
        }

        Verdict root() throws IOException {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                return new Verdict(NOT_JSON, false);
            }
            boolean found = false;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                JsonToken value = p.nextToken();
                if (field.equals(array)) {
                    found = value == JsonToken.START_ARRAY;  // the last one counts, as in a JSON tree
                    if (found) {
                        push(array, -1, 0);
                        elements(request);
                        depth--;
                        continue;
                    }
                }
                p.skipChildren();
            }
            if (!found) {
                return new Verdict("no " + array + " array: not an OTLP " + requestName, false);
            }
            return new Verdict(broken == null ? null : "not an OTLP " + requestName + ": " + broken, true);
        }

        /** The parser on START_ARRAY of objects of `shape`: each element, up to END_ARRAY. */
        private void elements(Shape shape) throws IOException {
            int i = 0;
            for (JsonToken t = p.nextToken(); t != JsonToken.END_ARRAY; t = p.nextToken(), i++) {
                push(null, i, i);
                if (t == JsonToken.START_OBJECT) {
                    object(shape);
                } else {
                    broken("is not an object");
                    p.skipChildren();
                }
                depth--;
            }
        }

        /** The parser on START_OBJECT of `shape`: every field, up to END_OBJECT. */
        private void object(Shape shape) throws IOException {
            listener.enter(shape);
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                JsonToken t = p.nextToken();
                int[] kind = shape.fields.get(field);
                if (kind == null) {
                    if (t != JsonToken.VALUE_NULL) {
                        listener.field(shape, field, p);
                    }
                } else if (t != JsonToken.VALUE_NULL) {
                    push(field, -1, kind[1]);
                    if (kind[0] == Shape.OBJECT && t == JsonToken.START_OBJECT) {
                        object(shape.shapes.get(field));
                    } else if (kind[0] == Shape.ARRAY && t == JsonToken.START_ARRAY) {
                        elements(shape.shapes.get(field));
                    } else if (kind[0] != Shape.SCALARS || t != JsonToken.START_ARRAY) {
                        broken(kind[0] == Shape.OBJECT ? "is not an object" : "is not an array");
                    }
                    depth--;
                }
                p.skipChildren();  // a no-op unless on the start of a container nobody read
            }
            listener.exit(shape);
        }

        private void push(String name, int index, int key) {
            if (depth == names.length) {
                names = Arrays.copyOf(names, depth * 2);
                indexes = Arrays.copyOf(indexes, depth * 2);
                keys = Arrays.copyOf(keys, depth * 2);
            }
            names[depth] = name;
            indexes[depth] = index;
            keys[depth] = key;
            depth++;
        }

        /** The place the path names is broken: kept if it comes first in the check's order. */
        private void broken(String what) {
            int[] key = Arrays.copyOf(keys, depth);
            if (brokenKey != null && Arrays.compare(key, brokenKey) >= 0) {
                return;
            }
            StringBuilder where = new StringBuilder();
            for (int i = 0; i < depth; i++) {
                if (names[i] == null) {
                    where.append('[').append(indexes[i]).append(']');
                } else {
                    where.append(i == 0 ? "" : ".").append(names[i]);
                }
            }
            brokenKey = key;
            broken = where.append(' ').append(what).toString();
        }
    }
}
