package io.stormwatch.flink.otlp;

import io.stormwatch.flink.OtlpJson;
import io.stormwatch.flink.OtlpJson.Shape;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.table.data.GenericRowData;

import java.io.IOException;
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
 */
public final class OtlpDecoder {
    public enum Encoding { OTLP_JSON, OTLP_PROTO }

    static final String REQUEST = "ExportTraceServiceRequest";
    private static final String[] KINDS = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
        "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
    private static final String[] CODES = {"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"};

    private final Encoding encoding;
    private final SpanRows rows;
    private final int payloadMaxChars;
    private final LongSupplier clockSeconds;

    /** Rows out: spans and messages, and how many of each were rejected. */
    long spans, rejectedSpans, rejectedMessages;

    public OtlpDecoder(Encoding encoding, long futureLimitSeconds, int payloadMaxChars, LongSupplier clockSeconds) {
        this.encoding = encoding;
        this.rows = new SpanRows(futureLimitSeconds);
        this.payloadMaxChars = payloadMaxChars;
        this.clockSeconds = clockSeconds;
    }

    public void decode(byte[] message, Consumer<GenericRowData> out) {
        try {
            if (encoding == Encoding.OTLP_JSON) json(message, out);
            else proto(message, out);
        } catch (RuntimeException e) {
            // Not expected: a bug must not stop the job nor lose the message.
            reject("not decoded (stormwatch otlp format: " + e + ")", message, out);
        }
    }

    private void emit(List<SpanFields> spans, Consumer<GenericRowData> out) {
        long now = clockSeconds.getAsLong();
        for (SpanFields s : spans) {
            GenericRowData row = rows.row(s, now);
            this.spans++;
            if (row.getField(SpanRows.REASON) != null) rejectedSpans++;
            out.accept(row);
        }
    }

    private void reject(String reason, byte[] message, Consumer<GenericRowData> out) {
        rejectedMessages++;
        out.accept(SpanRows.message(reason, payload(message)));
    }

    /** The message as the dead letters keep it: text (bytes that are not UTF-8 as U+FFFD), or base64 for protobuf; cut. */
    private String payload(byte[] message) {
        if (message == null) return null;
        String text = encoding == Encoding.OTLP_JSON ? new String(message, StandardCharsets.UTF_8)
                : Base64.getEncoder().encodeToString(message);
        // Cut in code points, as SQL's SUBSTRING counts characters.
        return text.codePointCount(0, text.length()) <= payloadMaxChars ? text
                : text.substring(0, text.offsetByCodePoints(0, payloadMaxChars));
    }

    // -- otlp_proto ---------------------------------------------------------------------------------

    private void proto(byte[] message, Consumer<GenericRowData> out) {
        if (message == null || message.length == 0) {
            reject(OtlpJson.EMPTY, message, out);
            return;
        }
        ProtoSpans request;
        try {
            request = ProtoSpans.read(message);
        } catch (IOException e) {
            reject("not an OTLP " + REQUEST + " in protobuf (is the exporter writing otlp_json to a topic read as "
                    + "otlp_proto?): " + e.getMessage(), message, out);
            return;
        }
        if (request.resourceSpans == 0) {
            // Bytes that decode as unknown fields only: protobuf of something else, or text.
            reject("no field of an OTLP " + REQUEST + " (is the exporter writing otlp_json to a topic read as otlp_proto?)",
                    message, out);
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

    private void json(byte[] message, Consumer<GenericRowData> out) {
        JsonSpans listener = new JsonSpans();
        OtlpJson.Verdict verdict = OtlpJson.walk(message, "resourceSpans", REQUEST, listener);
        if (!verdict.read) {
            reject(verdict.reason, message, out);
            return;
        }
        if (verdict.reason != null) {
            // The shape is broken somewhere: the message goes to the dead letters saying where, and the
            // spans that could be read go on as usual.
            reject(verdict.reason, message, out);
        }
        emit(listener.spans, out);
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
            } else if (shape == OtlpJson.LINK) {
                linkTrace = linkSpan = null;
            }
        }

        @Override
        public void exit(Shape shape) {
            if (shape == OtlpJson.ATTRIBUTE) {
                // A span's attributes while in a span, else the resource's (the resource may come after the spans).
                (span != null ? span.attributes : resource).offer(attributeKey, attributeValue);
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
