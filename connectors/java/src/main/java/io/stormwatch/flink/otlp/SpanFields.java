package io.stormwatch.flink.otlp;

import java.util.ArrayList;
import java.util.List;

/**
 * One span as either encoding gives it, before validation: ids as sent (JSON text, or protobuf bytes in
 * lowercase hex), enums by their OTLP names, times as integers (null when absent or not integers), and
 * the values of the attributes stormwatch reads.
 */
final class SpanFields {
    String traceId, spanId, parentSpanId, name, kind, statusCode, statusMessage;
    Long start, end;
    /** Links as (trace id, span id) pairs, as sent. */
    final List<String[]> links = new ArrayList<>(0);
    /** The span's own attributes stormwatch reads: {@link #SPAN_KEYS}. */
    final FirstValues attributes = new FirstValues(SPAN_KEYS);
    /** Its integer ones: {@link #SPAN_INT_KEYS}, as decimal text; one whose value is not an integer reads as absent. */
    final FirstValues intAttributes = new FirstValues(SPAN_INT_KEYS);
    /** Its resource's: {@link #RESOURCE_KEYS}; shared by the spans of one resource. */
    FirstValues resource;

    // Who a CLIENT span calls when the callee is not traced: the current semantic-convention names
    // first, then the ones they replaced (service.peer.name, peer.service; db.system.name, db.system).
    static final String[] SPAN_KEYS = {"service.peer.name", "peer.service", "db.system.name", "db.system", "server.address"};
    // How often an HTTP client had sent the request before this attempt (0 or absent the first time).
    static final String[] SPAN_INT_KEYS = {"http.request.resend_count"};
    // service.name, and what names the instance: service.instance.id, else k8s.pod.name, else host.name.
    static final String[] RESOURCE_KEYS = {"service.name", "service.instance.id", "k8s.pod.name", "host.name"};

    /**
     * The string value of the first attribute with each key, as SQL's lookup of the key/value list had it:
     * the first entry with the key decides, and one whose value is not a string reads as absent. (The SQL
     * looked at the first 32 entries only; this looks at all.)
     */
    static final class FirstValues {
        private final String[] keys;
        final String[] values;
        private final boolean[] found;

        FirstValues(String[] keys) {
            this.keys = keys;
            this.values = new String[keys.length];
            this.found = new boolean[keys.length];
        }

        void offer(String key, String value) {
            if (key == null) return;
            for (int i = 0; i < keys.length; i++) {
                if (keys[i].equals(key)) offer(i, value);
            }
        }

        /** The value of an attribute with the i-th key. */
        void offer(int i, String value) {
            if (!found[i]) {
                found[i] = true;
                values[i] = value;
            }
        }

        String first(int... indexes) {
            for (int i : indexes) {
                if (values[i] != null) return values[i];
            }
            return null;
        }
    }
}
