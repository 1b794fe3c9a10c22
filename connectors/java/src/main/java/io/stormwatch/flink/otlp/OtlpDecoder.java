package io.stormwatch.flink.otlp;

import io.stormwatch.flink.OtlpJson;
import io.stormwatch.flink.OtlpJson.Shape;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.table.data.GenericRowData;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * One Kafka message of OTLP traces -> one row per span (SpanRows), parsed once: OTLP JSON by a streaming
 * walk (OtlpJson, which also judges the message's shape), OTLP protobuf field by field (ProtoSpans:
 * faster than the generated classes, which build every attribute, and refusing the same messages).
 * Never throws for bad input: a message that does not decode is one row with its reason.
 *
 * <p>AUTO decides per message, so one topic may carry both encodings (the Collector's kafka exporter
 * writes otlp_proto unless told otherwise): a message whose first byte, after an optional UTF-8 byte
 * order mark and JSON whitespace, is '{' is OTLP JSON; one whose first byte is 0x0A is protobuf (a
 * request's only field is resourceSpans, field 1, length-delimited: encoders write it first, and an
 * empty request is an empty message); anything else is neither. 0x0A is also a newline: "\n{" begins a
 * protobuf request whose first resourceSpans is 123 bytes long. Such a message is read as protobuf when
 * it is not JSON and reads as a protobuf request.
 */
public final class OtlpDecoder {
    public enum Encoding { OTLP_JSON, OTLP_PROTO, AUTO }

    static final String REQUEST = "ExportTraceServiceRequest";
    /** AUTO's reasons: no hint at a misconfigured topic, since both encodings are read. */
    static final String AUTO_NOT_JSON = "not a JSON object (it begins with '{', as OTLP JSON does, but does not parse)";
    static final String AUTO_NEITHER = "not a JSON object, nor an OTLP " + REQUEST + " in protobuf";
    static final String AUTO_FIRST_BYTE = "it begins with neither '{' nor 0x0A, the tag of resourceSpans that begins one";
    /** The first byte of every protobuf request an encoder writes: field 1 (resourceSpans), length-delimited. */
    private static final byte PROTO_FIRST = 0x0A;
    private static final String[] KINDS = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
        "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
    private static final String[] CODES = {"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"};

    private final Encoding encoding;
    private final SpanRows rows;
    private final int payloadMaxChars;
    private final LongSupplier clockSeconds;

    /** Rows out: spans and messages, and how many of each were rejected. */
    long spans, rejectedSpans, rejectedMessages;
    /** The same counts as metrics of the source that reads with this decoder (countInto), if any. */
    private Counter spanCounter, rejectedSpanCounter, rejectedMessageCounter;

    public OtlpDecoder(Encoding encoding, long futureLimitSeconds, int payloadMaxChars, LongSupplier clockSeconds) {
        this.encoding = encoding;
        this.rows = new SpanRows(futureLimitSeconds);
        this.payloadMaxChars = payloadMaxChars;
        this.clockSeconds = clockSeconds;
    }

    /** The message's rows of format 'otlp' (SpanRows). */
    public void decode(byte[] message, Consumer<GenericRowData> out) {
        spans(message, s -> out.accept(SpanRows.row(s)));
    }

    /**
     * The message's spans, valid or rejected with their reason, and one {@link OtlpSpan} with the reason
     * for a message that does not decode (or breaks OTLP JSON's shape), in the order format 'otlp' gives
     * their rows.
     */
    public void spans(byte[] message, Consumer<OtlpSpan> out) {
        long s = spans, rs = rejectedSpans, rm = rejectedMessages;
        try {
            switch (encoding) {
                case OTLP_JSON: json(message, out); break;
                case OTLP_PROTO: proto(message, out); break;
                default: auto(message, out); break;
            }
        } catch (RuntimeException e) {
            // Not expected: a bug must not stop the job nor lose the message.
            reject("not decoded (stormwatch otlp format: " + e + ")", message,
                    encoding == Encoding.OTLP_JSON || encoding == Encoding.AUTO && isText(message), out);
        }
        if (spanCounter != null) {
            spanCounter.inc(spans - s);
            rejectedSpanCounter.inc(rejectedSpans - rs);
            rejectedMessageCounter.inc(rejectedMessages - rm);
        }
    }

    /** Counts what it decodes from now on into `group` too: otlpSpans, otlpRejectedSpans, otlpRejectedMessages. */
    public void countInto(MetricGroup group) {
        spanCounter = group.counter("otlpSpans");
        rejectedSpanCounter = group.counter("otlpRejectedSpans");
        rejectedMessageCounter = group.counter("otlpRejectedMessages");
    }

    /** The encoding format 'otlp' names `value` (its option 'otlp.encoding'); IllegalArgumentException if none. */
    public static Encoding encoding(String value) {
        switch (value) {
            case "otlp_json": return Encoding.OTLP_JSON;
            case "otlp_proto": return Encoding.OTLP_PROTO;
            case "auto": return Encoding.AUTO;
            default:
                throw new IllegalArgumentException("encoding '" + value
                        + "': stormwatch reads auto (either, decided per message), otlp_json or otlp_proto");
        }
    }

    private void emit(List<SpanFields> spans, Consumer<OtlpSpan> out) {
        long now = clockSeconds.getAsLong();
        for (SpanFields s : spans) {
            OtlpSpan span = rows.span(s, now);
            this.spans++;
            if (span.reason != null) rejectedSpans++;
            out.accept(span);
        }
    }

    private void reject(String reason, byte[] message, boolean asText, Consumer<OtlpSpan> out) {
        rejectedMessages++;
        out.accept(OtlpSpan.message(reason, payload(message, asText)));
    }

    /** The message as the dead letters keep it: text (bytes that are not UTF-8 as U+FFFD), or base64; cut. */
    private String payload(byte[] message, boolean asText) {
        if (message == null) return null;
        String text = asText ? new String(message, StandardCharsets.UTF_8) : Base64.getEncoder().encodeToString(message);
        // Cut in code points, as SQL's SUBSTRING counts characters.
        return text.codePointCount(0, text.length()) <= payloadMaxChars ? text
                : text.substring(0, text.offsetByCodePoints(0, payloadMaxChars));
    }

    // -- otlp_proto ---------------------------------------------------------------------------------

    private void proto(byte[] message, Consumer<OtlpSpan> out) {
        if (message == null || message.length == 0) {
            reject(OtlpJson.EMPTY, message, false, out);
            return;
        }
        ProtoSpans request;
        try {
            request = ProtoSpans.read(message);
        } catch (IOException e) {
            if (encoding == Encoding.AUTO) reject(AUTO_NEITHER + ": " + e.getMessage(), message, isText(message), out);
            else reject("not an OTLP " + REQUEST + " in protobuf (is the exporter writing otlp_json to a topic read as "
                    + "otlp_proto?): " + e.getMessage(), message, false, out);
            return;
        }
        if (request.resourceSpans == 0) {
            // Bytes that decode as unknown fields only: protobuf of something else, or text.
            if (encoding == Encoding.AUTO) reject(AUTO_NEITHER + " (no field of one)", message, isText(message), out);
            else reject("no field of an OTLP " + REQUEST + " (is the exporter writing otlp_json to a topic read as "
                    + "otlp_proto?)", message, false, out);
            return;
        }
        emit(request.spans, out);
    }

    static String kindName(int kind) {
        return KINDS[kind > 0 && kind < KINDS.length ? kind : 0];
    }

    static String codeName(int code) {
        return CODES[code > 0 && code < CODES.length ? code : 0];
    }

    // -- otlp_json ----------------------------------------------------------------------------------

    private void json(byte[] message, Consumer<OtlpSpan> out) {
        JsonSpans listener = new JsonSpans();
        OtlpJson.Verdict verdict = OtlpJson.walk(message, "resourceSpans", REQUEST, listener);
        if (!verdict.read) {
            reject(verdict.reason, message, true, out);
            return;
        }
        if (verdict.reason != null) {
            // The shape is broken somewhere: the message goes to the dead letters saying where, and the
            // spans that could be read go on as usual.
            reject(verdict.reason, message, true, out);
        }
        emit(listener.spans, out);
    }

    // -- auto ---------------------------------------------------------------------------------------

    private void auto(byte[] message, Consumer<OtlpSpan> out) {
        if (message == null || message.length == 0) {
            reject(OtlpJson.EMPTY, message, true, out);
        } else if (!looksLikeJson(message)) {
            if (message[0] == PROTO_FIRST) proto(message, out);
            else reject(AUTO_NEITHER + " (" + AUTO_FIRST_BYTE + ")", message, isText(message), out);
        } else {
            JsonSpans listener = new JsonSpans();
            OtlpJson.Verdict verdict = OtlpJson.walk(message, "resourceSpans", REQUEST, listener);
            if (!verdict.read && message[0] == '\n') {
                // "\n{...": protobuf too (field 1, 123 bytes long), when it reads as a request.
                try {
                    ProtoSpans request = ProtoSpans.read(message);
                    if (request.resourceSpans > 0) {
                        emit(request.spans, out);
                        return;
                    }
                } catch (IOException e) {
                    // Neither: the JSON reason, as the message looks like JSON.
                }
            }
            if (verdict.reason != null) {
                reject(verdict.reason.equals(OtlpJson.NOT_JSON) ? AUTO_NOT_JSON : verdict.reason, message, true, out);
            }
            if (verdict.read) emit(listener.spans, out);
        }
    }

    /** Whether the first byte after an optional UTF-8 byte order mark and JSON whitespace is '{'. */
    static boolean looksLikeJson(byte[] message) {
        int i = message.length >= 3 && (message[0] & 0xff) == 0xEF && (message[1] & 0xff) == 0xBB
                && (message[2] & 0xff) == 0xBF ? 3 : 0;
        while (i < message.length && (message[i] == ' ' || message[i] == '\t' || message[i] == '\n' || message[i] == '\r')) {
            i++;
        }
        return i < message.length && message[i] == '{';
    }

    /** UTF-8 text without control characters other than whitespace: kept as text in a dead letter, else base64. */
    static boolean isText(byte[] message) {
        if (message == null) return false;
        for (byte b : message) {
            if ((b & 0xff) < 0x20 && b != '\t' && b != '\n' && b != '\r') return false;
        }
        try {
            StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(message));
            return true;
        } catch (CharacterCodingException e) {
            return false;
        }
    }

    /**
     * Builds the spans from the walk. A scalar field is read as Flink's JSON format read it into the
     * old table's columns: strings from any scalar's text (a container's JSON text), integers from
     * numbers or from strings of digits, anything else absent.
     */
    private static final class JsonSpans implements OtlpJson.Listener {
        final List<SpanFields> spans = new ArrayList<>();
        private int resourceStart;  // the first span of the current resourceSpans element
        private SpanFields.FirstValues resource;
        private SpanFields span;
        private String attributeKey, attributeValue, linkTrace, linkSpan;
        private Long attributeInt;

        @Override
        public void enter(Shape shape) {
            if (shape == OtlpJson.RESOURCE_SPANS) {
                resourceStart = spans.size();
                resource = new SpanFields.FirstValues(SpanFields.RESOURCE_KEYS);
            } else if (shape == OtlpJson.SPAN) {
                span = new SpanFields();
                span.kind = KINDS[0];
                span.statusCode = CODES[0];
            } else if (shape == OtlpJson.ATTRIBUTE) {
                attributeKey = attributeValue = null;
                attributeInt = null;
            } else if (shape == OtlpJson.LINK) {
                linkTrace = linkSpan = null;
            }
        }

        @Override
        public void exit(Shape shape) {
            if (shape == OtlpJson.ATTRIBUTE) {
                // A span's attributes while in a span, else the resource's (the resource may come after the spans).
                (span != null ? span.attributes : resource).offer(attributeKey, attributeValue);
                if (span != null) span.intAttributes.offer(attributeKey, attributeInt == null ? null : attributeInt.toString());
            } else if (shape == OtlpJson.LINK) {
                span.links.add(new String[] {linkTrace, linkSpan});
            } else if (shape == OtlpJson.SPAN) {
                spans.add(span);
                span = null;
            } else if (shape == OtlpJson.RESOURCE_SPANS) {
                for (int i = resourceStart; i < spans.size(); i++) spans.get(i).resource = resource;
            }
        }

        @Override
        public void field(Shape shape, String field, JsonParser p) throws IOException {
            if (shape == OtlpJson.SPAN) {
                switch (field) {
                    case "traceId": span.traceId = text(p); break;
                    case "spanId": span.spanId = text(p); break;
                    case "parentSpanId": span.parentSpanId = text(p); break;
                    case "name": span.name = text(p); break;
                    case "kind": span.kind = name(KINDS, integer(p)); break;
                    case "startTimeUnixNano": span.start = integer(p); break;
                    case "endTimeUnixNano": span.end = integer(p); break;
                    default: break;
                }
            } else if (shape == OtlpJson.STATUS) {
                if (field.equals("code")) span.statusCode = name(CODES, integer(p));
                else if (field.equals("message")) span.statusMessage = text(p);  // "" is none: SpanRows
            } else if (shape == OtlpJson.ATTRIBUTE) {
                if (field.equals("key")) attributeKey = text(p);
            } else if (shape == OtlpJson.VALUE) {
                if (field.equals("stringValue")) attributeValue = text(p);
                else if (field.equals("intValue")) attributeInt = integer(p);  // int64 as a string in OTLP JSON
            } else if (shape == OtlpJson.LINK) {
                if (field.equals("traceId")) linkTrace = text(p);
                else if (field.equals("spanId")) linkSpan = text(p);
            }
        }

        private static String name(String[] names, Long value) {
            return names[value != null && value > 0 && value < names.length ? value.intValue() : 0];
        }

        private static String text(JsonParser p) throws IOException {
            JsonToken t = p.currentToken();
            if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) {
                return p.readValueAsTree().toString();
            }
            return p.getText();
        }

        private static Long integer(JsonParser p) throws IOException {
            JsonToken t = p.currentToken();
            try {
                if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) return p.getLongValue();
                if (t == JsonToken.VALUE_STRING) return Long.parseLong(p.getText().trim());
            } catch (IOException | NumberFormatException e) {
                // Out of range, or not digits: absent, as before.
            }
            return null;
        }
    }
}
