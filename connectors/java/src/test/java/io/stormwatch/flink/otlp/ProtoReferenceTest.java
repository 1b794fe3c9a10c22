package io.stormwatch.flink.otlp;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.common.v1.AnyValue;
import io.opentelemetry.proto.common.v1.ArrayValue;
import io.opentelemetry.proto.common.v1.InstrumentationScope;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.common.v1.KeyValueList;
import io.opentelemetry.proto.resource.v1.Resource;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import io.opentelemetry.proto.trace.v1.Status;
import org.apache.flink.table.data.GenericRowData;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * ProtoSpans against the OTLP generated classes: for valid messages and thousands of broken ones, the
 * same rows, the same messages refused, with the same parser message.
 */
class ProtoReferenceTest {
    static final long NOW = OtlpDecoderTest.NOW;

    /** What the decoder gave before ProtoSpans: the generated classes' parseFrom, then their getters. */
    static List<GenericRowData> reference(byte[] message) {
        List<GenericRowData> out = new ArrayList<>();
        String request = "ExportTraceServiceRequest";
        if (message.length == 0) {
            out.add(SpanRows.message("empty message", ""));
            return out;
        }
        ExportTraceServiceRequest r;
        try {
            r = ExportTraceServiceRequest.parseFrom(message);
        } catch (InvalidProtocolBufferException e) {
            out.add(SpanRows.message("not an OTLP " + request + " in protobuf (is the exporter writing otlp_json to a "
                    + "topic read as otlp_proto?): " + e.getMessage(), cut(message)));
            return out;
        }
        if (r.getAllFields().isEmpty()) {
            out.add(SpanRows.message("no field of an OTLP " + request + " (is the exporter writing otlp_json to a topic "
                    + "read as otlp_proto?)", cut(message)));
            return out;
        }
        SpanRows rows = new SpanRows(3600);
        for (ResourceSpans rs : r.getResourceSpansList()) {
            SpanFields.FirstValues resource = new SpanFields.FirstValues(SpanFields.RESOURCE_KEYS);
            for (KeyValue kv : rs.getResource().getAttributesList()) offer(resource, kv);
            for (ScopeSpans ss : rs.getScopeSpansList()) {
                for (Span span : ss.getSpansList()) {
                    SpanFields s = new SpanFields();
                    s.resource = resource;
                    s.traceId = hex(span.getTraceId());
                    s.spanId = hex(span.getSpanId());
                    s.parentSpanId = hex(span.getParentSpanId());
                    s.name = span.getName();
                    s.kind = OtlpDecoder.kindName(span.getKindValue());
                    s.statusCode = OtlpDecoder.codeName(span.hasStatus() ? span.getStatus().getCodeValue() : 0);
                    s.statusMessage = span.hasStatus() ? span.getStatus().getMessage() : null;
                    s.start = span.getStartTimeUnixNano();
                    s.end = span.getEndTimeUnixNano();
                    for (KeyValue kv : span.getAttributesList()) offer(s.attributes, kv);
                    for (Span.Link l : span.getLinksList()) s.links.add(new String[] {hex(l.getTraceId()), hex(l.getSpanId())});
                    out.add(rows.row(s, NOW));
                }
            }
        }
        return out;
    }

    static void offer(SpanFields.FirstValues values, KeyValue kv) {
        values.offer(kv.getKey(), kv.hasValue() && kv.getValue().hasStringValue() ? kv.getValue().getStringValue() : null);
    }

    static String hex(ByteString b) {
        return java.util.HexFormat.of().formatHex(b.toByteArray());
    }

    static String cut(byte[] message) {
        String b = Base64.getEncoder().encodeToString(message);
        return b.length() > 40 ? b.substring(0, 40) : b;
    }

    static void same(byte[] message) {
        assertEquals(OtlpDecoderTest.render(reference(message)),
                OtlpDecoderTest.render(OtlpDecoderTest.proto(message)), () -> Base64.getEncoder().encodeToString(message));
    }

    static KeyValue kv(String key, AnyValue value) {
        return KeyValue.newBuilder().setKey(key).setValue(value).build();
    }

    static AnyValue str(String s) {
        return AnyValue.newBuilder().setStringValue(s).build();
    }

    /** A message using every field of every message in the request, nested values too. */
    static byte[] everything() {
        AnyValue nested = AnyValue.newBuilder().setArrayValue(ArrayValue.newBuilder().addValues(str("a"))
                .addValues(AnyValue.newBuilder().setKvlistValue(KeyValueList.newBuilder().addValues(kv("k", str("v")))))
                .addValues(AnyValue.newBuilder().setBoolValue(true)).addValues(AnyValue.newBuilder().setIntValue(-3))
                .addValues(AnyValue.newBuilder().setDoubleValue(1.5)).addValues(AnyValue.newBuilder().setBytesValue(ByteString.copyFromUtf8("b")))).build();
        Span.Builder span = Span.newBuilder().setTraceId(OtlpDecoderTest.bytes(OtlpDecoderTest.TRACE))
                .setSpanId(OtlpDecoderTest.bytes(OtlpDecoderTest.SPAN)).setParentSpanId(OtlpDecoderTest.bytes(OtlpDecoderTest.PARENT))
                .setTraceState("a=b").setFlags(257).setName("GET /x").setKind(Span.SpanKind.SPAN_KIND_CLIENT)
                .setStartTimeUnixNano(OtlpDecoderTest.START).setEndTimeUnixNano(OtlpDecoderTest.END)
                .addAttributes(kv("service.peer.name", str("payments"))).addAttributes(kv("db.system", nested))
                .addAttributes(kv("server.address", str("db.local"))).setDroppedAttributesCount(2)
                .addEvents(Span.Event.newBuilder().setTimeUnixNano(5).setName("e").addAttributes(kv("x", nested)).setDroppedAttributesCount(1))
                .setDroppedEventsCount(3)
                .addLinks(Span.Link.newBuilder().setTraceId(OtlpDecoderTest.bytes("ab".repeat(16))).setSpanId(OtlpDecoderTest.bytes("cd".repeat(8)))
                        .setTraceState("t").addAttributes(kv("l", nested)).setDroppedAttributesCount(1).setFlags(1))
                .setDroppedLinksCount(4).setStatus(Status.newBuilder().setCode(Status.StatusCode.STATUS_CODE_ERROR).setMessage("bad"));
        Span second = span.clone().setSpanId(OtlpDecoderTest.bytes("1234567890abcdef")).clearStatus().setKindValue(42)
                .setEndTimeUnixNano(OtlpDecoderTest.START - 1).build();
        return ExportTraceServiceRequest.newBuilder().addResourceSpans(ResourceSpans.newBuilder()
                .setResource(Resource.newBuilder().addAttributes(kv("service.name", str("checkout")))
                        .addAttributes(kv("host.name", str("h1"))).addAttributes(kv("service.instance.id", nested)).setDroppedAttributesCount(1))
                .setSchemaUrl("https://s")
                .addScopeSpans(ScopeSpans.newBuilder().setScope(InstrumentationScope.newBuilder().setName("lib").setVersion("1")
                        .addAttributes(kv("s", nested)).setDroppedAttributesCount(1)).addSpans(span).addSpans(second).setSchemaUrl("u")))
                .addResourceSpans(ResourceSpans.newBuilder().addScopeSpans(ScopeSpans.newBuilder().addSpans(span.clone().setStatus(
                        Status.newBuilder().setMessage("")))))
                .build().toByteArray();
    }

    @Test
    void validMessagesGiveTheSameRows() {
        same(everything());
        same(OtlpDecoderTest.proto(OtlpDecoderTest.resource(OtlpDecoderTest.SERVICE, OtlpDecoderTest.span())));
        assertEquals(3, OtlpDecoderTest.proto(everything()).size());
    }

    @Test
    void brokenMessagesAreRefusedAsTheGeneratedClassesRefuseThem() {
        Random random = new Random(18);
        byte[] good = everything();
        int refused = 0;
        for (int i = 0; i < 8_000; i++) {
            byte[] m = good.clone();
            switch (random.nextInt(4)) {
                case 0: m = Arrays.copyOf(m, random.nextInt(m.length)); break;
                case 1: for (int k = random.nextInt(4); k >= 0; k--) m[random.nextInt(m.length)] = (byte) random.nextInt(256); break;
                case 2: m[random.nextInt(m.length)] ^= (byte) (1 << random.nextInt(8)); break;
                default: {  // a random run of bytes spliced in
                    int at = random.nextInt(m.length);
                    byte[] junk = new byte[1 + random.nextInt(6)];
                    random.nextBytes(junk);
                    byte[] n = new byte[m.length + junk.length];
                    System.arraycopy(m, 0, n, 0, at);
                    System.arraycopy(junk, 0, n, at, junk.length);
                    System.arraycopy(m, at, n, at + junk.length, m.length - at);
                    m = n;
                }
            }
            same(m);
            if (OtlpDecoderTest.render(reference(m)).get(0).contains("in protobuf")) refused++;
        }
        assertTrue(refused > 500, "the mutations must break messages often: " + refused);
    }

    @Test
    void nestingBeyondTheLimitIsRefusedAsTheGeneratedClassesRefuseIt() {
        for (int levels : new int[] {90, 97, 98, 99, 100, 150}) {
            AnyValue v = str("deep");
            for (int i = 0; i < levels; i++) v = AnyValue.newBuilder().setArrayValue(ArrayValue.newBuilder().addValues(v)).build();
            same(ExportTraceServiceRequest.newBuilder().addResourceSpans(ResourceSpans.newBuilder()
                    .setResource(Resource.newBuilder().addAttributes(kv("x", v)))).build().toByteArray());
        }
        // Unknown groups nested deeply (field 99, start and end group tags).
        for (int levels : new int[] {98, 99, 100, 101, 5000}) {
            byte[] m = new byte[levels * 4];
            for (int i = 0; i < levels; i++) {
                m[2 * i] = (byte) (0x80 | (99 << 3 | 3) & 0x7f);
                m[2 * i + 1] = (byte) ((99 << 3 | 3) >> 7);
                m[m.length - 2 - 2 * i] = (byte) (0x80 | (99 << 3 | 4) & 0x7f);
                m[m.length - 1 - 2 * i] = (byte) ((99 << 3 | 4) >> 7);
            }
            same(m);
        }
    }
}
