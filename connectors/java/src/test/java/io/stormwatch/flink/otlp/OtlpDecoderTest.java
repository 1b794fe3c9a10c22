package io.stormwatch.flink.otlp;

import com.google.protobuf.ByteString;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.common.v1.AnyValue;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.resource.v1.Resource;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import io.opentelemetry.proto.trace.v1.Status;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.api.ValidationException;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The otlp format's decoder: rows, reasons and dead-letter payloads for both encodings. */
class OtlpDecoderTest {
    static final long NOW = 1_700_000_100L;  // the decoder's clock, seconds
    static final String TRACE = "0af7651916cd43dd8448eb211c80319c", SPAN = "b7ad6b7169203331", PARENT = "00f067aa0ba902b7";
    static final long START = 1_700_000_000_000_000_000L, END = 1_700_000_000_005_000_000L;

    // -- messages of both encodings from one description ----------------------------------------

    /** A span as a test describes it: OTLP JSON field -> value (ids hex, times numbers). */
    static Map<String, Object> span(Object... fields) {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("traceId", TRACE);
        s.put("spanId", SPAN);
        s.put("name", "op");
        s.put("kind", 2);
        s.put("startTimeUnixNano", START);
        s.put("endTimeUnixNano", END);
        for (int i = 0; i < fields.length; i += 2) {
            if (fields[i + 1] == null) s.remove(fields[i]);
            else s.put((String) fields[i], fields[i + 1]);
        }
        return s;
    }

    /** One resource (attributes: key, value, ...) with one scope of these spans. */
    @SafeVarargs
    static Object[] resource(String[] attributes, Map<String, Object>... spans) {
        return new Object[] {attributes, spans};
    }

    static String[] attrs(String... kv) {
        return kv;
    }

    static String json(Object[]... resources) {
        StringBuilder b = new StringBuilder("{\"resourceSpans\":[");
        for (int r = 0; r < resources.length; r++) {
            String[] attributes = (String[]) resources[r][0];
            @SuppressWarnings("unchecked") Map<String, Object>[] spans = (Map<String, Object>[]) resources[r][1];
            b.append(r > 0 ? "," : "").append("{\"resource\":{\"attributes\":").append(jsonAttributes(attributes))
                    .append("},\"scopeSpans\":[{\"scope\":{\"name\":\"t\"},\"spans\":[");
            for (int i = 0; i < spans.length; i++) {
                b.append(i > 0 ? "," : "").append(spans[i].entrySet().stream().map(e -> quote(e.getKey()) + ":" + jsonValue(e.getKey(), e.getValue()))
                        .collect(Collectors.joining(",", "{", "}")));
            }
            b.append("]}]}");
        }
        return b.append("]}").toString();
    }

    static String jsonAttributes(String[] kv) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < kv.length; i += 2) {
            out.add("{\"key\":" + quote(kv[i]) + ",\"value\":" + (kv[i + 1] == null ? "{\"intValue\":\"7\"}"
                    : "{\"stringValue\":" + quote(kv[i + 1]) + "}") + "}");
        }
        return "[" + String.join(",", out) + "]";
    }

    @SuppressWarnings("unchecked")
    static String jsonValue(String field, Object v) {
        if (field.equals("attributes")) return jsonAttributes((String[]) v);
        if (field.equals("links")) {
            return Arrays.stream((String[][]) v).map(l -> "{\"traceId\":" + quote(l[0]) + ",\"spanId\":" + quote(l[1]) + "}")
                    .collect(Collectors.joining(",", "[", "]"));
        }
        if (field.equals("status")) {
            Object[] s = (Object[]) v;
            return "{\"code\":" + s[0] + (s[1] == null ? "" : ",\"message\":" + quote((String) s[1])) + "}";
        }
        if (v instanceof Long) return quote(v.toString());  // OTLP JSON writes 64-bit integers as strings
        if (v instanceof String) return quote((String) v);
        return String.valueOf(v);
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static byte[] proto(Object[]... resources) {
        ExportTraceServiceRequest.Builder request = ExportTraceServiceRequest.newBuilder();
        for (Object[] r : resources) {
            @SuppressWarnings("unchecked") Map<String, Object>[] spans = (Map<String, Object>[]) r[1];
            ScopeSpans.Builder scope = ScopeSpans.newBuilder();
            for (Map<String, Object> s : spans) {
                Span.Builder span = Span.newBuilder();
                for (Map.Entry<String, Object> e : s.entrySet()) {
                    Object v = e.getValue();
                    switch (e.getKey()) {
                        case "traceId": span.setTraceId(bytes((String) v)); break;
                        case "spanId": span.setSpanId(bytes((String) v)); break;
                        case "parentSpanId": span.setParentSpanId(bytes((String) v)); break;
                        case "name": span.setName((String) v); break;
                        case "kind": span.setKindValue((Integer) v); break;
                        case "startTimeUnixNano": span.setStartTimeUnixNano((Long) v); break;
                        case "endTimeUnixNano": span.setEndTimeUnixNano((Long) v); break;
                        case "attributes": span.addAllAttributes(protoAttributes((String[]) v)); break;
                        case "status": {
                            Object[] st = (Object[]) v;
                            Status.Builder status = Status.newBuilder().setCodeValue((Integer) st[0]);
                            if (st[1] != null) status.setMessage((String) st[1]);
                            span.setStatus(status);
                            break;
                        }
                        case "links":
                            for (String[] l : (String[][]) v) {
                                span.addLinks(Span.Link.newBuilder().setTraceId(bytes(l[0])).setSpanId(bytes(l[1])));
                            }
                            break;
                        default: throw new IllegalArgumentException(e.getKey());
                    }
                }
                scope.addSpans(span);
            }
            request.addResourceSpans(ResourceSpans.newBuilder()
                    .setResource(Resource.newBuilder().addAllAttributes(protoAttributes((String[]) r[0])))
                    .addScopeSpans(scope));
        }
        return request.build().toByteArray();
    }

    static List<KeyValue> protoAttributes(String[] kv) {
        List<KeyValue> out = new ArrayList<>();
        for (int i = 0; i < kv.length; i += 2) {
            AnyValue value = kv[i + 1] == null ? AnyValue.newBuilder().setIntValue(7).build()
                    : AnyValue.newBuilder().setStringValue(kv[i + 1]).build();
            out.add(KeyValue.newBuilder().setKey(kv[i]).setValue(value).build());
        }
        return out;
    }

    static ByteString bytes(String hex) {
        return ByteString.copyFrom(HexFormat.of().parseHex(hex));
    }

    // -- decoding -------------------------------------------------------------------------------

    static List<GenericRowData> decode(OtlpDecoder.Encoding encoding, byte[] message) {
        List<GenericRowData> rows = new ArrayList<>();
        new OtlpDecoder(encoding, 3600, 40, () -> NOW).decode(message, rows::add);
        return rows;
    }

    static List<GenericRowData> json(String message) {
        return decode(OtlpDecoder.Encoding.OTLP_JSON, message.getBytes(StandardCharsets.UTF_8));
    }

    static List<GenericRowData> proto(byte[] message) {
        return decode(OtlpDecoder.Encoding.OTLP_PROTO, message);
    }

    /** Both encodings of the same resources: the same rows. */
    static List<GenericRowData> both(Object[]... resources) {
        List<GenericRowData> fromJson = json(json(resources)), fromProto = proto(proto(resources));
        assertEquals(render(fromJson), render(fromProto), "otlp_json and otlp_proto rows differ");
        return fromJson;
    }

    static String str(RowData row, int i) {
        return row.isNullAt(i) ? null : row.getString(i).toString();
    }

    static List<String> render(List<GenericRowData> rows) {
        return rows.stream().map(OtlpDecoderTest::render).collect(Collectors.toList());
    }

    static String render(RowData row) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < SpanRows.FIELDS; i++) {
            if (row.isNullAt(i)) out.add("null");
            else if (i == 12) {
                ArrayData links = row.getArray(i);
                List<String> ls = new ArrayList<>();
                for (int j = 0; j < links.size(); j++) {
                    RowData l = links.getRow(j, 2);
                    ls.add(str(l, 0) + "/" + str(l, 1));
                }
                out.add(ls.toString());
            } else if (i == 13 || i == 14) out.add(String.valueOf(row.getLong(i)));
            else if (i == 15) out.add(String.valueOf(row.getDouble(i)));
            else out.add(str(row, i));
        }
        return String.join(" | ", out);
    }

    static String reason(List<GenericRowData> rows) {
        assertEquals(1, rows.size(), () -> render(rows).toString());
        return str(rows.get(0), SpanRows.REASON);
    }

    static final String[] SERVICE = attrs("service.name", "checkout", "service.instance.id", "pod-1");

    @Test
    void aValidSpanIsOneRowTheSameFromBothEncodings() {
        List<GenericRowData> rows = both(resource(SERVICE, span("parentSpanId", PARENT, "status", new Object[] {2, "boom"},
                "attributes", attrs("peer.service", "db", "db.system", "postgresql", "server.address", "db.local"),
                "links", new String[][] {{"1".repeat(32), "2".repeat(16)}})));
        assertEquals(List.of(TRACE + " | " + SPAN + " | " + PARENT + " | checkout | pod-1 | op | SPAN_KIND_SERVER | "
                + "STATUS_CODE_ERROR | boom | db | postgresql | db.local | [" + "1".repeat(32) + "/" + "2".repeat(16) + "] | "
                + START + " | " + END + " | 5.0 | null | null"), render(rows));
    }

    @Test
    void idsInUpperCaseComeOutInLowerCaseAndAnEmptyParentIsARoot() {
        GenericRowData row = json(json(resource(SERVICE, span("traceId", TRACE.toUpperCase(), "spanId", SPAN.toUpperCase(),
                "parentSpanId", "", "links", new String[][] {{"AB".repeat(16), "CD".repeat(8)}})))).get(0);
        assertEquals(TRACE, str(row, 0));
        assertEquals(SPAN, str(row, 1));
        assertNull(str(row, 2));
        assertEquals("[" + "ab".repeat(16) + "/" + "cd".repeat(8) + "]", render(row).split(" \\| ")[12]);
        assertNull(str(row, SpanRows.REASON));
    }

    @Test
    void enumsByTheirOtlpNamesAndUnknownValuesAsUnspecified() {
        List<GenericRowData> rows = both(resource(SERVICE, span("kind", 5), span("kind", 9, "status", new Object[] {7, null}),
                span("kind", 0, "status", new Object[] {1, ""}), span("kind", null)));
        assertEquals(List.of("SPAN_KIND_CONSUMER", "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_UNSPECIFIED"),
                rows.stream().map(r -> str(r, 6)).collect(Collectors.toList()));
        assertEquals(Arrays.asList("STATUS_CODE_UNSET", "STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_UNSET"),
                rows.stream().map(r -> str(r, 7)).collect(Collectors.toList()));
        assertNull(str(rows.get(2), 8), "an empty status message is none (protobuf cannot tell them apart)");
    }

    @Test
    void attributesTheCurrentNameFirstAndTheFirstEntryOfAKeyDecides() {
        GenericRowData row = both(resource(attrs("service.instance.id", null, "k8s.pod.name", "pod-7", "host.name", "h"),
                span("attributes", attrs("service.peer.name", "new", "peer.service", "old", "db.system", "old-db",
                        "db.system.name", null, "db.system.name", "ignored", "server.address", "a", "server.address", "b")))).get(0);
        assertEquals("unknown_service", str(row, 3), "no service.name: the SDK default");
        assertEquals("pod-7", str(row, 4), "service.instance.id is not a string: k8s.pod.name");
        assertEquals("new", str(row, 9));
        assertEquals("old-db", str(row, 10), "the first db.system.name is not a string: db.system");
        assertEquals("a", str(row, 11));
        assertEquals("h", str(both(resource(attrs("service.name", "s", "host.name", "h"), span())).get(0), 4));
    }

    /** The spans of a message as the span path reads them. */
    static List<OtlpSpan> spans(OtlpDecoder.Encoding encoding, byte[] message) {
        List<OtlpSpan> spans = new ArrayList<>();
        new OtlpDecoder(encoding, 3600, 40, () -> NOW).spans(message, spans::add);
        return spans;
    }

    @Test
    void theResendCountOfAnHttpClientSpanFromBothEncodings() {
        // attrs(key, null) is the integer 7 (jsonAttributes, the protobuf builder); a string is not a count.
        Object[][] resources = {resource(SERVICE, span("attributes", attrs("http.request.resend_count", null)),
                span("attributes", attrs("http.request.resend_count", "2")), span(),
                span("attributes", attrs("http.request.resend_count", "x", "http.request.resend_count", null)))};
        for (List<OtlpSpan> spans : List.of(
                spans(OtlpDecoder.Encoding.OTLP_JSON, json(resources).getBytes(StandardCharsets.UTF_8)),
                spans(OtlpDecoder.Encoding.OTLP_PROTO, proto(resources)))) {
            assertEquals(Arrays.asList(7L, null, null, null),
                    spans.stream().map(s -> s.resendCount).collect(Collectors.toList()),
                    "the first entry of a key decides, as for the string attributes");
        }
    }

    @Test
    void aResourceAfterItsSpansStillNamesThem() {
        String message = "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[" + json(resource(SERVICE, span()))
                .replaceAll(".*\"spans\":\\[(.*)\\]\\}\\]\\}\\]\\}$", "$1") + "]}],"
                + "\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"late\"}}]}}]}";
        assertEquals("late", str(json(message).get(0), 3));
    }

    @Test
    void eachInvalidSpanIsRejectedWithTheSameReasonFromBothEncodings() {
        Object[][] cases = {
            {span("traceId", "abcd"), "traceId is not 32 hex digits"},
            {span("traceId", "0".repeat(32)), "traceId is all zeros"},
            {span("spanId", "abcd"), "spanId is not 16 hex digits"},
            {span("spanId", "0".repeat(16)), "spanId is all zeros"},
            {span("parentSpanId", "01"), "parentSpanId is neither empty nor 16 hex digits"},
            {span("startTimeUnixNano", 0L), SpanRows.TIME_REASON},
            {span("endTimeUnixNano", 0L), SpanRows.TIME_REASON},
            {span("endTimeUnixNano", START - 1), "endTimeUnixNano is before startTimeUnixNano"},
            {span("endTimeUnixNano", (NOW + 3601) * 1_000_000_000L), "endTimeUnixNano is more than 3600 s ahead of the clock"},
        };
        for (Object[] c : cases) {
            @SuppressWarnings("unchecked") Map<String, Object> s = (Map<String, Object>) c[0];
            List<GenericRowData> rows = both(resource(SERVICE, s));
            assertEquals(c[1], reason(rows), s.toString());
            GenericRowData row = rows.get(0);
            assertEquals(0L, row.getLong(SpanRows.END), "a rejected row's event time is 0: it never moves the watermark");
        }
        // Up to the limit is fine; the check is on whole seconds, as UNIX_TIMESTAMP() had it.
        assertNull(reason(both(resource(SERVICE, span("endTimeUnixNano", (NOW + 3600) * 1_000_000_000L + 999_999_999L)))));
    }

    @Test
    void checksComeInTheirOrder() {
        assertEquals("traceId is not 32 hex digits", reason(both(resource(SERVICE, span("traceId", "ab", "spanId", "cd", "startTimeUnixNano", 0L)))));
        assertEquals("spanId is not 16 hex digits", reason(both(resource(SERVICE, span("spanId", "cd", "startTimeUnixNano", 0L)))));
        assertEquals(SpanRows.TIME_REASON, reason(both(resource(SERVICE, span("startTimeUnixNano", 0L, "endTimeUnixNano", 1L)))));
    }

    @Test
    void jsonOnlyReasons() {
        assertEquals("traceId missing or not a string", reason(json(json(resource(SERVICE, span("traceId", null))))));
        assertEquals("spanId missing or not a string", reason(json(json(resource(SERVICE, span("spanId", null))))));
        // Numbers are read as their digits, times from numbers or from strings of digits (trimmed).
        assertEquals("traceId is not 32 hex digits", reason(json(json(resource(SERVICE, span("traceId", 12345))))));
        assertNull(reason(json(json(resource(SERVICE, span("startTimeUnixNano", "  1700000000000000000 "))))));
        assertNull(reason(json(json(resource(SERVICE, span("startTimeUnixNano", 1700000000000000000.0))))));
        for (Object bad : new Object[] {"soon", "9".repeat(25), true, "\"\""}) {
            assertEquals(SpanRows.TIME_REASON, reason(json(json(resource(SERVICE, span("endTimeUnixNano", bad))))), bad.toString());
        }
    }

    @Test
    void aRejectedSpansPayloadIsTheJsonObjectTheSqlMadeWithItsOriginalTimes() {
        long future = (NOW + 86_400) * 1_000_000_000L;
        GenericRowData row = both(resource(attrs("service.name", "s\"vc"), span("traceId", TRACE.toUpperCase(),
                "parentSpanId", "", "endTimeUnixNano", future))).get(0);
        assertEquals("{\"endTimeUnixNano\":" + future + ",\"name\":\"op\",\"parentSpanId\":null,\"serviceName\":\"s\\\"vc\","
                + "\"spanId\":\"" + SPAN + "\",\"startTimeUnixNano\":" + START + ",\"traceId\":\"" + TRACE + "\"}",
                str(row, SpanRows.PAYLOAD));
        GenericRowData missing = json(json(resource(SERVICE, span("startTimeUnixNano", null)))).get(0);
        assertTrue(str(missing, SpanRows.PAYLOAD).contains("\"startTimeUnixNano\":null"));
    }

    @Test
    void aBadSpanDoesNotTakeItsNeighboursDown() {
        List<GenericRowData> rows = both(resource(SERVICE, span("spanId", "abcd"), span("spanId", PARENT)),
                resource(attrs("service.name", "other"), span()));
        assertEquals(Arrays.asList("spanId is not 16 hex digits", null, null),
                rows.stream().map(r -> str(r, SpanRows.REASON)).collect(Collectors.toList()));
        assertEquals("other", str(rows.get(2), 3));
    }

    @Test
    void jsonMessagesThatDoNotDecodeAreOneRowEachWithTheirPayloadCut() {
        assertEquals("empty message", reason(json("")));
        assertEquals("empty message", reason(decode(OtlpDecoder.Encoding.OTLP_JSON, null)));
        String notJson = "not a JSON object (is the exporter writing otlp_proto to a topic read as otlp_json?)";
        for (String m : new String[] {"this is not json", "[1, 2, 3]", "   ", "\"text\"", json(resource(SERVICE, span())).substring(0, 90)}) {
            List<GenericRowData> rows = json(m);
            assertEquals(notJson, reason(rows), m);
            assertEquals(0L, rows.get(0).getLong(SpanRows.END));
            assertEquals(m.length() > 40 ? m.substring(0, 40) : m, str(rows.get(0), SpanRows.PAYLOAD));
        }
        assertEquals("no resourceSpans array: not an OTLP ExportTraceServiceRequest", reason(json("{\"resourceSpans\": 5}")));
        assertEquals("no resourceSpans array: not an OTLP ExportTraceServiceRequest", reason(json("{\"other\": []}")));
        // Bytes that are not UTF-8: the payload keeps them as U+FFFD; cut in characters, not UTF-16 units.
        List<GenericRowData> rows = decode(OtlpDecoder.Encoding.OTLP_JSON, new byte[] {(byte) 0xff, 'x'});
        assertEquals(notJson, reason(rows));
        assertEquals("\ufffdx", str(rows.get(0), SpanRows.PAYLOAD));
        String emoji = "\uD83D\uDE00".repeat(50);
        assertEquals("\uD83D\uDE00".repeat(40), str(json(emoji).get(0), SpanRows.PAYLOAD));
    }

    @Test
    void aJsonMessageBreakingTheShapeIsRejectedOnceSayingWhereAndItsReadableSpansGoOn() {
        String good = json(resource(SERVICE, span()));
        String withJunkSpan = good.replace("\"spans\":[", "\"spans\":[5,");
        List<GenericRowData> rows = json(withJunkSpan);
        assertEquals(2, rows.size());
        assertEquals("not an OTLP ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0] is not an object",
                str(rows.get(0), SpanRows.REASON));
        assertNull(str(rows.get(1), SpanRows.REASON));
        // A scalar for the status and for the attributes: the check's order names the object (status) first,
        // wherever it stands in the message; the span is read without them.
        String both = good.replace("\"name\":\"op\"", "\"name\":\"op\",\"attributes\":1,\"status\":\"x\"");
        rows = json(both);
        assertEquals("not an OTLP ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0].status is not an object",
                str(rows.get(0), SpanRows.REASON));
        assertEquals("STATUS_CODE_UNSET", str(rows.get(1), 7));
        assertEquals("not an OTLP ExportTraceServiceRequest: resourceSpans[1] is not an object",
                reason(json(good.replace("]}]}]}", "]}]},true]}")).subList(0, 1)));
        assertEquals("not an OTLP ExportTraceServiceRequest: resourceSpans[0].resource is not an object",
                reason(json(good.replace("\"resource\":{\"attributes\":", "\"resource\":[],\"x\":{\"attributes\":")).subList(0, 1)));
        assertEquals(1, json(good.replace("\"scopeSpans\":[", "\"scopeSpans\":7,\"y\":[")).size(), "no spans: only the reason");
        // A syntax error anywhere, even after spans were read: the message is not JSON, no span is kept.
        assertNull(reason(json(good + "]")), "text after the request's object is ignored, as before");
        assertEquals("not a JSON object (is the exporter writing otlp_proto to a topic read as otlp_json?)",
                reason(json(good.substring(0, good.length() - 2))));
    }

    @Test
    void jsonFieldsOfOtherTypesAreReadAsFlinksJsonFormatReadThem() {
        String message = json(resource(SERVICE, span("name", "X", "kind", null))).replace("\"name\":\"X\"", "\"name\":{\"a\":[1]},\"kind\":\"3\"");
        GenericRowData row = json(message).get(0);
        assertEquals("{\"a\":[1]}", str(row, 5));
        assertEquals("SPAN_KIND_CLIENT", str(row, 6));
    }

    @Test
    void protobufMessagesThatDoNotDecodeAreOneRowEachWithTheParsersReason() {
        assertEquals("empty message", reason(proto(new byte[0])));
        String reason = reason(proto("this is not protobuf".getBytes(StandardCharsets.UTF_8)));
        assertTrue(reason.startsWith("not an OTLP ExportTraceServiceRequest in protobuf (is the exporter writing otlp_json "
                + "to a topic read as otlp_proto?): "), reason);
        assertTrue(reason(proto(json(resource(SERVICE, span())).getBytes(StandardCharsets.UTF_8)))
                .startsWith("not an OTLP ExportTraceServiceRequest in protobuf"));
        // Valid protobuf of something else: unknown fields only.
        byte[] other = Status.newBuilder().setMessage("hello").build().toByteArray();
        List<GenericRowData> rows = proto(other);
        assertEquals("no field of an OTLP ExportTraceServiceRequest (is the exporter writing otlp_json to a topic read as "
                + "otlp_proto?)", reason(rows));
        assertEquals(java.util.Base64.getEncoder().encodeToString(other), str(rows.get(0), SpanRows.PAYLOAD));
        byte[] good = proto(resource(SERVICE, span()));
        assertTrue(reason(proto(Arrays.copyOf(good, good.length - 3))).startsWith("not an OTLP ExportTraceServiceRequest in protobuf"));
        assertEquals(40, str(proto(Arrays.copyOf(good, good.length - 3)).get(0), SpanRows.PAYLOAD).length());
    }

    @Test
    void protobufIdsOfTheWrongLengthAreRejectedAsNotHex() {
        assertEquals("spanId is not 16 hex digits", reason(proto(proto(resource(SERVICE, span("spanId", ""))))));
        assertEquals("traceId is not 32 hex digits", reason(proto(proto(resource(SERVICE, span("traceId", "0102"))))));
    }

    // -- auto: each message in the encoding it is in ----------------------------------------------

    static List<GenericRowData> auto(byte[] message) {
        return decode(OtlpDecoder.Encoding.AUTO, message);
    }

    static List<GenericRowData> auto(String message) {
        return auto(message.getBytes(StandardCharsets.UTF_8));
    }

    static final Object[] TWO_SPANS = resource(SERVICE, span("parentSpanId", PARENT, "status", new Object[] {2, "boom"}),
            span("spanId", PARENT));

    @Test
    void autoReadsJsonAndProtobufMessagesAsTheirForcedEncodingsDo() {
        List<String> want = render(both(TWO_SPANS));
        assertEquals(2, want.size());
        assertEquals(want, render(auto(json(TWO_SPANS))));
        assertEquals(want, render(auto(proto(TWO_SPANS))));
        // One decoder, the encodings interleaved message by message: nothing carries over.
        List<GenericRowData> rows = new ArrayList<>();
        OtlpDecoder decoder = new OtlpDecoder(OtlpDecoder.Encoding.AUTO, 3600, 40, () -> NOW);
        byte[][] messages = {proto(TWO_SPANS), json(TWO_SPANS).getBytes(StandardCharsets.UTF_8), proto(TWO_SPANS),
            proto(TWO_SPANS), json(TWO_SPANS).getBytes(StandardCharsets.UTF_8)};
        for (byte[] m : messages) decoder.decode(m, rows::add);
        List<String> five = new ArrayList<>();
        for (int i = 0; i < messages.length; i++) five.addAll(want);
        assertEquals(five, render(rows));
        assertEquals(0, decoder.rejectedMessages);
    }

    @Test
    void autoReadsJsonAfterLeadingWhitespaceAndAByteOrderMark() {
        List<String> want = render(both(TWO_SPANS));
        for (String prefix : new String[] {" ", "\n", "\t", "\r\n", " \n\t\r  \n", "\ufeff", "\ufeff\n  "}) {
            assertEquals(want, render(auto(prefix + json(TWO_SPANS))), () -> "prefix " + Arrays.toString(prefix.toCharArray()));
        }
        assertTrue(OtlpDecoder.looksLikeJson("\ufeff {}".getBytes(StandardCharsets.UTF_8)));
        assertTrue(!OtlpDecoder.looksLikeJson(" \n".getBytes(StandardCharsets.UTF_8)));
        assertTrue(!OtlpDecoder.looksLikeJson(new byte[] {(byte) 0xEF, (byte) 0xBB}));
    }

    @Test
    void autoReadsAProtobufRequestThatBeginsWithANewlineAndABraceAsProtobuf() {
        // 0x0A is field 1 (resourceSpans) and a newline; a first resourceSpans of 123 bytes puts '{' after it.
        byte[] message = null;
        for (int n = 0; n < 200 && message == null; n++) {
            byte[] m = proto(resource(attrs("service.name", "checkout", "pad", "x".repeat(n)), span()));
            if (m[1] == '{') message = m;
        }
        assertTrue(message != null && message[0] == '\n' && OtlpDecoder.looksLikeJson(message));
        List<GenericRowData> rows = auto(message);
        assertEquals(render(proto(message)), render(rows));
        assertNull(str(rows.get(0), SpanRows.REASON));
        assertEquals("checkout", str(rows.get(0), 3));
        // Broken JSON beginning so is not protobuf either: JSON's reason.
        assertEquals(OtlpDecoder.AUTO_NOT_JSON, reason(auto("\n{\"resourceSpans\": [")));
    }

    @Test
    void autoSendsAMessageOfNeitherEncodingToTheDeadLettersWithTheReason() {
        assertEquals("empty message", reason(auto(new byte[0])));
        assertEquals("empty message", reason(auto((byte[]) null)));
        assertNull(str(auto((byte[]) null).get(0), SpanRows.PAYLOAD));
        String neither = "not a JSON object, nor an OTLP ExportTraceServiceRequest in protobuf";
        // Neither '{' nor 0x0A first: neither encoding; text stays text in the payload.
        for (String m : new String[] {"this is not json", "[1, 2, 3]", "   ", "\"text\"", "5", "null", "x".repeat(60)}) {
            List<GenericRowData> rows = auto(m);
            assertEquals(neither + " (" + OtlpDecoder.AUTO_FIRST_BYTE + ")", reason(rows), m);
            assertEquals(0L, rows.get(0).getLong(SpanRows.END));
            assertEquals(m.length() > 40 ? m.substring(0, 40) : m, str(rows.get(0), SpanRows.PAYLOAD), m);
        }
        // 0x0A first: read as protobuf, which refuses it with the parser's message.
        for (String m : new String[] {"\nthis is not protobuf", "\n", "\n\n\n"}) {
            assertTrue(reason(auto(m)).startsWith(neither + ": "), m + ": " + reason(auto(m)));
        }
        // '{' first: read as JSON; its reasons, without a hint at the other encoding.
        assertEquals(OtlpDecoder.AUTO_NOT_JSON, reason(auto("{\"resourceSpans\": [")));
        assertEquals(OtlpDecoder.AUTO_NOT_JSON, reason(auto("  {not json}")));
        assertEquals("no resourceSpans array: not an OTLP ExportTraceServiceRequest", reason(auto("{\"other\": []}")));
        String good = json(resource(SERVICE, span()));
        List<GenericRowData> rows = auto(good.replace("\"spans\":[", "\"spans\":[5,"));
        assertEquals(Arrays.asList("not an OTLP ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0] is not an object",
                null), rows.stream().map(r -> str(r, SpanRows.REASON)).collect(Collectors.toList()));
        // Binary: base64 in the payload, as for protobuf.
        byte[] garbage = {(byte) 0xff, 0x00, 0x13, 0x37};
        rows = auto(garbage);
        assertEquals(neither + " (" + OtlpDecoder.AUTO_FIRST_BYTE + ")", reason(rows));
        assertEquals(java.util.Base64.getEncoder().encodeToString(garbage), str(rows.get(0), SpanRows.PAYLOAD));
        byte[] garbageAfterTag = {0x0A, (byte) 0xff, 0x00, 0x13, 0x37};
        assertTrue(reason(auto(garbageAfterTag)).startsWith(neither + ": "), reason(auto(garbageAfterTag)));
        assertEquals(java.util.Base64.getEncoder().encodeToString(garbageAfterTag), str(auto(garbageAfterTag).get(0), SpanRows.PAYLOAD));
        // Protobuf of another message: its first field is not resourceSpans.
        byte[] other = Status.newBuilder().setMessage("hello").build().toByteArray();
        rows = auto(other);
        assertEquals(neither + " (" + OtlpDecoder.AUTO_FIRST_BYTE + ")", reason(rows));
        assertEquals(java.util.Base64.getEncoder().encodeToString(other), str(rows.get(0), SpanRows.PAYLOAD));
        // One whose field 1 is not a message (nor of ExportTraceServiceRequest's shape): unknown fields only.
        byte[] unknownOnly = {0x0A, 0x02, 0x78, 0x01};  // resourceSpans { field 15: 1 }
        assertEquals(render(proto(unknownOnly)), render(auto(unknownOnly)));
        byte[] cut = Arrays.copyOf(proto(TWO_SPANS), proto(TWO_SPANS).length - 3);
        assertTrue(reason(auto(cut)).startsWith(neither + ": "));
        assertEquals(40, str(auto(cut).get(0), SpanRows.PAYLOAD).length());
        // Spans that decode but are invalid: the same reasons as either forced encoding.
        Object[] bad = resource(SERVICE, span("traceId", "abcd"));
        assertEquals(render(both(bad)), render(auto(json(bad))));
        assertEquals(render(both(bad)), render(auto(proto(bad))));
    }

    @Test
    void theFactoryRefusesATableOfOtherColumnsSayingWhichItNeeds() {
        OtlpFormatFactory.checkColumns(SpanRows.ROW);
        OtlpFormatFactory.checkColumns(SpanRows.ROW.notNull());  // as the planner hands it over
        ValidationException e = assertThrows(ValidationException.class, () -> OtlpFormatFactory.checkColumns(
                DataTypes.ROW(DataTypes.FIELD("trace_id", DataTypes.STRING()))));
        assertTrue(e.getMessage().contains("dead_letter_payload"), e.getMessage());
        assertThrows(ValidationException.class, () -> OtlpFormatFactory.encoding("json"));
        assertEquals(OtlpDecoder.Encoding.AUTO, OtlpFormatFactory.encoding("auto"));
        assertEquals("auto", OtlpFormatFactory.ENCODING.defaultValue());
    }

    @Test
    void rowsAreGenericRowsTheKafkaSourceCanProject() {
        for (GenericRowData row : both(resource(SERVICE, span()))) {
            assertEquals(SpanRows.FIELDS, row.getArity());
            assertTrue(row.getField(0) instanceof StringData);
        }
    }

    @Test
    void theCountsGoToTheSourcesMetricsOncePerMessage() {
        Map<String, Counter> counters = new LinkedHashMap<>();
        MetricGroup group = new UnregisteredMetricsGroup() {
            @Override
            public Counter counter(String name) {
                return counters.computeIfAbsent(name, n -> super.counter(n));
            }
        };
        OtlpDecoder decoder = new OtlpDecoder(OtlpDecoder.Encoding.AUTO, 3600, 40, () -> NOW);
        decoder.decode(proto(TWO_SPANS), row -> { });  // before countInto: counted by the decoder alone
        decoder.countInto(group);
        decoder.decode(json(TWO_SPANS).getBytes(StandardCharsets.UTF_8), row -> { });
        decoder.decode("not otlp".getBytes(StandardCharsets.UTF_8), row -> { });
        assertEquals(2, counters.get("otlpSpans").getCount());
        assertEquals(0, counters.get("otlpRejectedSpans").getCount());
        assertEquals(1, counters.get("otlpRejectedMessages").getCount());
        assertEquals(4, decoder.spans);
    }
}
