package io.stormwatch.flink.otlp;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonGenerator;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.data.GenericArrayData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.types.DataType;

import java.io.IOException;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The rows of the otlp format: one per span, valid or rejected with its reason, and one per message
 * that does not decode. The checks and their reasons are those stormwatch always gave (formerly SQL:
 * sql/views/otlp_spans_flat.sql), in the same order.
 */
final class SpanRows {
    /** The physical columns a table of format 'otlp' must declare, in this order. */
    static final DataType ROW = DataTypes.ROW(
            DataTypes.FIELD("trace_id", DataTypes.STRING()),
            DataTypes.FIELD("span_id", DataTypes.STRING()),
            DataTypes.FIELD("parent_span_id", DataTypes.STRING()),
            DataTypes.FIELD("service_name", DataTypes.STRING()),
            DataTypes.FIELD("service_instance_id", DataTypes.STRING()),
            DataTypes.FIELD("span_name", DataTypes.STRING()),
            DataTypes.FIELD("span_kind", DataTypes.STRING()),
            DataTypes.FIELD("status_code", DataTypes.STRING()),
            DataTypes.FIELD("status_message", DataTypes.STRING()),
            DataTypes.FIELD("peer_service", DataTypes.STRING()),
            DataTypes.FIELD("db_system", DataTypes.STRING()),
            DataTypes.FIELD("server_address", DataTypes.STRING()),
            DataTypes.FIELD("links", DataTypes.ARRAY(DataTypes.ROW(
                    DataTypes.FIELD("trace_id", DataTypes.STRING()), DataTypes.FIELD("span_id", DataTypes.STRING())))),
            DataTypes.FIELD("start_time_unix_nano", DataTypes.BIGINT()),
            DataTypes.FIELD("end_time_unix_nano", DataTypes.BIGINT()),
            DataTypes.FIELD("duration_ms", DataTypes.DOUBLE()),
            DataTypes.FIELD("reject_reason", DataTypes.STRING()),
            DataTypes.FIELD("dead_letter_payload", DataTypes.STRING()));
    static final int FIELDS = 18, END = 14, REASON = 16, PAYLOAD = 17;

    static final String TIME_REASON = "startTimeUnixNano or endTimeUnixNano missing, zero or not an integer";
    private static final JsonFactory JSON = new JsonFactory();

    private final long futureLimitSeconds;
    private final String futureReason;

    SpanRows(long futureLimitSeconds) {
        this.futureLimitSeconds = futureLimitSeconds;
        this.futureReason = "endTimeUnixNano is more than " + futureLimitSeconds + " s ahead of the clock";
    }

    /** A non-negative integer attribute's value; null when absent, or negative (not a count). */
    private static Long count(String decimal) {
        if (decimal == null) return null;
        long n = Long.parseLong(decimal);  // written by the decoder from an integer
        return n < 0 ? null : n;
    }

    /** A span as the decoder judged it; `nowSeconds` is the wall clock (UNIX_TIMESTAMP() in the SQL it replaces). */
    OtlpSpan span(SpanFields s, long nowSeconds) {
        OtlpSpan o = new OtlpSpan();
        o.traceId = lower(s.traceId);
        o.spanId = lower(s.spanId);
        String parent = lower(s.parentSpanId);
        o.parentSpanId = parent != null && parent.isEmpty() ? null : parent;
        SpanFields.FirstValues r = s.resource;
        o.service = r == null || r.values[0] == null ? "unknown_service" : r.values[0];
        o.instance = r == null ? null : r.first(1, 2, 3);
        o.name = s.name;
        o.kind = s.kind;
        o.status = s.statusCode;
        // proto3 writes an unset string as empty: no message, in both encodings alike.
        o.statusMessage = s.statusMessage == null || s.statusMessage.isEmpty() ? null : s.statusMessage;
        o.peerService = s.attributes.first(0, 1);
        o.dbSystem = s.attributes.first(2, 3);
        o.serverAddress = s.attributes.first(4);
        o.resendCount = count(s.intAttributes.values[0]);
        o.reason = reject(s, nowSeconds);
        if (o.reason == null) {
            List<String[]> links = new ArrayList<>(s.links.size());
            for (String[] link : s.links) links.add(new String[] {lower(link[0]), lower(link[1])});
            o.links = links;
            o.start = s.start;
            o.end = s.end;
        } else {
            o.payload = payload(o.traceId, o.spanId, o.parentSpanId, o.service, s.name, s.start, s.end);
        }
        return o;
    }

    /**
     * The row of a span, valid or rejected with its reason, or of a whole message that does not decode
     * (its reason and (part of) the message itself as payload).
     */
    static GenericRowData row(OtlpSpan s) {
        GenericRowData row = new GenericRowData(FIELDS);
        row.setField(0, StringData.fromString(s.traceId));
        row.setField(1, StringData.fromString(s.spanId));
        row.setField(2, StringData.fromString(s.parentSpanId));
        row.setField(3, StringData.fromString(s.service));
        row.setField(4, StringData.fromString(s.instance));
        row.setField(5, StringData.fromString(s.name));
        row.setField(6, StringData.fromString(s.kind));
        row.setField(7, StringData.fromString(s.status));
        row.setField(8, StringData.fromString(s.statusMessage));
        row.setField(9, StringData.fromString(s.peerService));
        row.setField(10, StringData.fromString(s.dbSystem));
        row.setField(11, StringData.fromString(s.serverAddress));
        if (s.reason == null) {
            Object[] links = new Object[s.links.size()];
            for (int i = 0; i < links.length; i++) {
                String[] link = s.links.get(i);
                links[i] = GenericRowData.of(StringData.fromString(link[0]), StringData.fromString(link[1]));
            }
            row.setField(12, new GenericArrayData(links));
            row.setField(13, s.start);
            row.setField(14, s.end);
            row.setField(15, (double) (s.end - s.start) / 1_000_000);
        } else {
            // Event time 0: a rejected span must not move the table's watermark (its end may be decades
            // ahead); its own times are in the payload.
            row.setField(END, 0L);
            row.setField(REASON, StringData.fromString(s.reason));
            row.setField(PAYLOAD, StringData.fromString(s.payload));
        }
        return row;
    }

    /** A span's row (SpanFields judged by {@link #span}). */
    GenericRowData row(SpanFields s, long nowSeconds) {
        return row(span(s, nowSeconds));
    }

    /** The row of a whole message that does not decode: its reason and (part of) the message itself. */
    static GenericRowData message(String reason, String payload) {
        return row(OtlpSpan.message(reason, payload));
    }

    private String reject(SpanFields s, long nowSeconds) {
        if (s.traceId == null) return "traceId missing or not a string";
        if (!hex(s.traceId, 32)) return "traceId is not 32 hex digits";
        if (zeros(s.traceId)) return "traceId is all zeros";
        if (s.spanId == null) return "spanId missing or not a string";
        if (!hex(s.spanId, 16)) return "spanId is not 16 hex digits";
        if (zeros(s.spanId)) return "spanId is all zeros";
        if (s.parentSpanId != null && !s.parentSpanId.isEmpty() && !hex(s.parentSpanId, 16)) {
            return "parentSpanId is neither empty nor 16 hex digits";
        }
        // Zero is how protobuf writes a time that was never set.
        if (s.start == null || s.end == null || s.start == 0 || s.end == 0) return TIME_REASON;
        if (s.end < s.start) return "endTimeUnixNano is before startTimeUnixNano";
        if (s.end / 1_000_000_000L > nowSeconds + futureLimitSeconds) return futureReason;
        return null;
    }

    /**
     * Exactly `digits` hex digits. (The SQL's REGEXP '^[0-9a-fA-F]{32}$' also let a trailing line break
     * through, Java's `$` matching before one; that id is refused here.)
     */
    static boolean hex(String id, int digits) {
        if (id.length() != digits) return false;
        for (int i = 0; i < digits; i++) {
            char c = id.charAt(i);
            if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) return false;
        }
        return true;
    }

    private static boolean zeros(String id) {
        for (int i = 0; i < id.length(); i++) {
            if (id.charAt(i) != '0') return false;
        }
        return true;
    }

    static String lower(String s) {
        return s == null ? null : s.toLowerCase(Locale.ROOT);
    }

    /**
     * A rejected span's payload, as Flink SQL's JSON_OBJECT rendered it before: keys sorted, nulls as
     * null, times as numbers, strings escaped by Jackson.
     */
    static String payload(String traceId, String spanId, String parent, String service, String name, Long start, Long end) {
        StringWriter out = new StringWriter(256);
        try (JsonGenerator g = JSON.createGenerator(out)) {
            g.writeStartObject();
            number(g, "endTimeUnixNano", end);
            g.writeStringField("name", name);
            g.writeStringField("parentSpanId", parent);
            g.writeStringField("serviceName", service);
            g.writeStringField("spanId", spanId);
            number(g, "startTimeUnixNano", start);
            g.writeStringField("traceId", traceId);
            g.writeEndObject();
        } catch (IOException e) {
            throw new IllegalStateException(e);  // a StringWriter does not fail
        }
        return out.toString();
    }

    private static void number(JsonGenerator g, String field, Long value) throws IOException {
        if (value == null) g.writeNullField(field);
        else g.writeNumberField(field, value);
    }

}
