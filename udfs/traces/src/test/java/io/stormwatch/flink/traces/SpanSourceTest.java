package io.stormwatch.flink.traces;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.stormwatch.flink.otlp.OtlpDecoder;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The span path's source gives what the table path gave: format 'otlp''s rows, projected as
 * sql/views/trace_input.sql did (callee = COALESCE(peer_service, db_system, server_address, 'unknown'))
 * and turned into span records, link probes and dead letters as SpanPath's row converter did (both kept
 * here as the reference), byte for byte; and the table's watermarks.
 */
class SpanSourceTest {
    static final long NOW = 1_800_000_000L;
    static final String T1 = "0AF7651916CD43DD8448EB211C80319C", T2 = "1bf7651916cd43dd8448eb211c80319d";

    static String span(String trace, String id, String parent, int kind, long start, long end, String attributes,
                       String links) {
        return "{\"traceId\":\"" + trace + "\",\"spanId\":\"" + id + "\"" + (parent == null ? "" : ",\"parentSpanId\":\"" + parent + "\"")
                + ",\"name\":\"GET /x ✓\",\"kind\":" + kind + ",\"startTimeUnixNano\":\"" + start + "\",\"endTimeUnixNano\":\"" + end + "\""
                + (attributes == null ? "" : ",\"attributes\":" + attributes)
                + (links == null ? "" : ",\"links\":" + links)
                + ",\"status\":{\"code\":2,\"message\":\"boom\"}}";
    }

    static String attr(String key, String value) {
        return "{\"key\":\"" + key + "\",\"value\":{\"stringValue\":\"" + value + "\"}}";
    }

    static byte[] message(String resourceAttributes, String... spans) {
        return ("{\"resourceSpans\":[{\"resource\":{\"attributes\":[" + resourceAttributes + "]},\"scopeSpans\":[{\"spans\":["
                + String.join(",", spans) + "]}]}]}").getBytes(StandardCharsets.UTF_8);
    }

    static final byte[][] MESSAGES = {
        message(attr("service.name", "checkout") + "," + attr("k8s.pod.name", "pod-1"),
                span(T1, "B7AD6B7169203331", null, 2, 1_700_000_000_000_000_000L, 1_700_000_000_250_000_000L, null, null),
                span(T1, "00f067aa0ba902b7", "b7ad6b7169203331", 3, 1_700_000_000_100_000_000L, 1_700_000_000_200_000_999L,
                        "[" + attr("db.system", "postgresql") + "," + attr("server.address", "db:5432") + "]", null),
                span(T1, "00f067aa0ba902b8", "b7ad6b7169203331", 3, 1_700_000_000_100_000_000L, 1_700_000_000_200_000_000L,
                        "[" + attr("server.address", "db:5432") + "," + attr("peer.service", "payments") + "]", null),
                span(T1, "00f067aa0ba902b9", "b7ad6b7169203331", 3, 1_700_000_000_100_000_000L, 1_700_000_000_200_000_000L, null, null)),
        // a CONSUMER with links: one probe per well-formed link, keyed by the linked trace
        message(attr("service.name", "worker"),
                span(T2, "1111111111111111", "", 5, 1_700_000_001_000_000_000L, 1_700_000_002_000_000_000L, null,
                        "[{\"traceId\":\"" + T1 + "\",\"spanId\":\"00F067AA0BA902B7\"},{\"spanId\":\"00f067aa0ba902b8\"},"
                                + "{\"traceId\":\"" + T2 + "\",\"spanId\":\"2222222222222222\"}]"),
                // a PRODUCER's links are kept, and probe nothing
                span(T2, "3333333333333333", "1111111111111111", 4, 1_700_000_001_000_000_000L, 1_700_000_001_500_000_000L, null,
                        "[{\"traceId\":\"" + T1 + "\",\"spanId\":\"00f067aa0ba902b7\"}]")),
        // rejected spans beside a valid one: their reasons and payloads
        message(attr("service.name", "checkout"),
                span("0000000000000000000000000000000", "b7ad6b7169203331", null, 2, 1, 2, null, null),
                span(T1, "b7ad6b7169203332", null, 2, 5, 4, null, null),
                span(T1, "b7ad6b7169203333", null, 2, 5, (NOW + 7200) * 1_000_000_000L, null, null),
                span(T1, "b7ad6b7169203334", null, 2, 5, 6, null, null)),
        // messages that do not decode, whole
        "{\"resourceSpans\":".getBytes(StandardCharsets.UTF_8),
        new byte[] {0x01, 0x02},
        null,
    };

    static OtlpDecoder decoder() {
        return new OtlpDecoder(OtlpDecoder.Encoding.AUTO, 3600, 40, () -> NOW);
    }

    /** The table path: format 'otlp''s rows, trace_input.sql's projection, SpanPath's row converter. */
    static List<SpanSource.Record> tablePath(byte[] message, int partition, long offset) {
        List<GenericRowData> rows = new ArrayList<>();
        decoder().decode(message, rows::add);
        List<SpanSource.Record> out = new ArrayList<>();
        for (RowData row : rows) {
            String reason = str(row, 16);
            if (reason != null) {
                SpanSource.Record dead = new SpanSource.Record();
                dead.reason = reason;
                dead.payload = str(row, 17);
                dead.partition = partition;
                dead.offset = offset;
                out.add(dead);
                continue;
            }
            SpanRecord s = new SpanRecord();
            s.traceId = str(row, 0);
            s.spanId = str(row, 1);
            s.parentSpanId = str(row, 2);
            s.service = str(row, 3);
            s.instance = str(row, 4);
            s.name = str(row, 5);
            s.kind = str(row, 6);
            s.status = str(row, 7);
            s.callee = str(row, 9) != null ? str(row, 9) : str(row, 10) != null ? str(row, 10)
                    : str(row, 11) != null ? str(row, 11) : "unknown";
            s.start = row.getLong(13);
            s.end = row.getLong(14);
            s.kafkaPartition = partition;
            s.kafkaOffset = offset;
            s.route = s.traceId;
            ArrayData links = row.getArray(12);
            if (links != null && links.size() > 0) {
                s.links = new String[links.size()];
                for (int i = 0; i < links.size(); i++) {
                    RowData link = links.getRow(i, 2);
                    String t = link.isNullAt(0) ? null : link.getString(0).toString();
                    String id = link.isNullAt(1) ? null : link.getString(1).toString();
                    s.links[i] = t == null || id == null ? "" : t.toLowerCase(Locale.ROOT) + "/" + id.toLowerCase(Locale.ROOT);
                }
            }
            out.add(record(EncodedSpan.of(s)));
            if (TraceFacts.CONSUMER.equals(s.kind) && s.links != null) {
                for (String link : s.links) {
                    int slash = link.indexOf('/');
                    if (slash <= 0) continue;
                    SpanRecord p = SpanRecord.decode(s.encode());
                    p.callee = null;
                    p.links = null;
                    p.route = link.substring(0, slash);
                    p.probeOf = link.substring(slash + 1);
                    out.add(record(EncodedSpan.of(p)));
                }
            }
        }
        return out;
    }

    static SpanSource.Record record(EncodedSpan e) {
        SpanSource.Record r = new SpanSource.Record();
        r.span = e;
        return r;
    }

    static String str(RowData row, int i) {
        return row.isNullAt(i) ? null : row.getString(i).toString();
    }

    static List<SpanSource.Record> source(byte[] message, int partition, long offset) {
        List<SpanSource.Record> out = new ArrayList<>();
        SpanSource.records(decoder(), message, partition, offset, out::add);
        return out;
    }

    static void assertSame(SpanSource.Record want, SpanSource.Record got) {
        assertEquals(want.span == null, got.span == null);
        if (want.span != null) {
            assertEquals(want.span.route, got.span.route);
            assertEquals(want.span.endMs, got.span.endMs);
            assertEquals(want.span.probe, got.span.probe);
            assertEquals(want.span.producer, got.span.producer);
            assertEquals(want.span.root, got.span.root);
            assertArrayEquals(want.span.bytes, got.span.bytes);
        }
        assertEquals(want.reason, got.reason);
        assertEquals(want.payload, got.payload);
        assertEquals(want.partition, got.partition);
        assertEquals(want.offset, got.offset);
    }

    @Test
    void theSameRecordsAsTheTablePath() {
        int total = 0, probes = 0, dead = 0;
        for (int i = 0; i < MESSAGES.length; i++) {
            List<SpanSource.Record> want = tablePath(MESSAGES[i], i % 2, 100L + i), got = source(MESSAGES[i], i % 2, 100L + i);
            assertEquals(want.size(), got.size(), "message " + i);
            for (int j = 0; j < want.size(); j++) assertSame(want.get(j), got.get(j));
            total += got.size();
            probes += got.stream().filter(r -> r.span != null && r.span.probe).count();
            dead += got.stream().filter(r -> r.span == null).count();
        }
        // What the messages hold: 4 + 2 + 1 valid spans, 2 probes, 3 rejected spans, 3 messages.
        assertEquals(15, total);
        assertEquals(2, probes);
        assertEquals(6, dead);
    }

    @Test
    void recordsAsTheAssemblerReadsThem() {
        List<SpanSource.Record> first = source(MESSAGES[0], 1, 7);
        SpanRecord root = SpanRecord.decode(first.get(0).span.bytes);
        assertEquals("0af7651916cd43dd8448eb211c80319c", root.traceId);
        assertEquals("b7ad6b7169203331", root.spanId);
        assertNull(root.parentSpanId);
        assertEquals("checkout", root.service);
        assertEquals("pod-1", root.instance);
        assertEquals("unknown", root.callee);
        assertEquals(1, root.kafkaPartition);
        assertEquals(7, root.kafkaOffset);
        assertTrue(first.get(0).span.root);
        assertEquals(1_700_000_000_250L, first.get(0).span.endMs);
        assertEquals("postgresql", SpanRecord.decode(first.get(1).span.bytes).callee);
        assertEquals(1_700_000_000_200L, first.get(1).span.endMs);
        assertEquals("payments", SpanRecord.decode(first.get(2).span.bytes).callee);

        List<SpanSource.Record> consumer = source(MESSAGES[1], 0, 8);
        SpanRecord probe = SpanRecord.decode(consumer.get(1).span.bytes);
        assertEquals("0af7651916cd43dd8448eb211c80319c", probe.route);
        assertEquals("00f067aa0ba902b7", probe.probeOf);
        assertTrue(consumer.get(1).span.probe);
        assertTrue(consumer.get(3).span.producer);

        List<SpanSource.Record> rejected = source(MESSAGES[2], 0, 9);
        assertEquals("traceId is not 32 hex digits", rejected.get(0).reason);
        assertEquals("endTimeUnixNano is before startTimeUnixNano", rejected.get(1).reason);
        assertEquals("endTimeUnixNano is more than 3600 s ahead of the clock", rejected.get(2).reason);
        assertEquals(9, rejected.get(0).offset);
        assertEquals(0L, SpanSource.timestamp(rejected.get(0)), "a rejected span never moves the watermark");
        assertEquals("empty message", source(null, 0, 1).get(0).reason);
    }

    @Test
    void watermarksAsTheTablesAreTheGreatestEndLessTheBound() {
        SpanSource.EndWatermarks w = new SpanSource.EndWatermarks(5000);
        List<Long> emitted = new ArrayList<>();
        WatermarkOutput out = new WatermarkOutput() {
            @Override public void emitWatermark(Watermark watermark) { emitted.add(watermark.getTimestamp()); }
            @Override public void markIdle() {}
            @Override public void markActive() {}
        };
        w.onPeriodicEmit(out);
        w.onEvent(null, 0, out);  // a dead letter
        w.onPeriodicEmit(out);
        w.onEvent(null, 20_000, out);
        w.onEvent(null, 12_000, out);
        w.onPeriodicEmit(out);
        w.onEvent(null, 0, out);
        w.onPeriodicEmit(out);
        assertEquals(List.of(Long.MIN_VALUE, -5000L, 15_000L, 15_000L), emitted);
    }

    @Test
    void refusesOptionsItWouldIgnore() {
        assertThrows(IllegalArgumentException.class, () -> SpanSource.kafka(
                Map.of("connector", "kafka", "topic", "t", "scan.startup.mode", "latest-offset"), "auto", 3600, 100));
        assertThrows(IllegalArgumentException.class, () -> SpanSource.kafka(
                Map.of("connector", "kafka", "topic", "t", "format", "json"), "auto", 3600, 100));
        assertThrows(IllegalArgumentException.class, () -> SpanSource.kafka(
                Map.of("connector", "kafka", "topic", "t"), "otlp_xml", 3600, 100));
        // A start time without its mode, or the mode without its time.
        assertThrows(IllegalArgumentException.class, () -> SpanSource.kafka(
                Map.of("connector", "kafka", "topic", "t", "scan.startup.timestamp-millis", "1"), "auto", 3600, 100));
        assertThrows(IllegalArgumentException.class, () -> SpanSource.kafka(
                Map.of("connector", "kafka", "topic", "t", "scan.startup.mode", "timestamp"), "auto", 3600, 100));
    }
}
