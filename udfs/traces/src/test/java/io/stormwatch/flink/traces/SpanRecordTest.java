package io.stormwatch.flink.traces;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** A span record kept in state as bytes comes back field for field. */
class SpanRecordTest {
    @Test
    void everyFieldComesBack() {
        SpanRecord s = new SpanRecord();
        s.traceId = "0af7651916cd43dd8448eb211c80319c";
        s.spanId = "b7ad6b7169203331";
        s.parentSpanId = "00f067aa0ba902b7";
        s.service = "llm-inference";
        s.instance = "llm-inference-2";
        s.name = "décodé ✓ 𝄞"; // two-, three- and four-byte UTF-8
        s.kind = "SPAN_KIND_CONSUMER";
        s.status = "STATUS_CODE_ERROR";
        s.callee = "";
        s.probeOf = "1111111111111111";
        s.route = "ffffffffffffffffffffffffffffffff";
        s.start = 1_700_000_000_123_456_789L;
        s.end = Long.MAX_VALUE;
        s.kafkaPartition = 7;
        s.kafkaOffset = 1L << 40;
        s.links = new String[] {"aa/bb", "", null};
        s.resendCount = 2;

        SpanRecord r = SpanRecord.decode(s.encode());

        assertEquals(s.traceId, r.traceId);
        assertEquals(s.spanId, r.spanId);
        assertEquals(s.parentSpanId, r.parentSpanId);
        assertEquals(s.service, r.service);
        assertEquals(s.instance, r.instance);
        assertEquals("décodé ✓ 𝄞", r.name);
        assertEquals(s.kind, r.kind);
        assertEquals(s.status, r.status);
        assertEquals("", r.callee);
        assertEquals(s.probeOf, r.probeOf);
        assertEquals(s.route, r.route);
        assertEquals(s.start, r.start);
        assertEquals(Long.MAX_VALUE, r.end);
        assertEquals(7, r.kafkaPartition);
        assertEquals(1L << 40, r.kafkaOffset);
        assertArrayEquals(new String[] {"aa/bb", "", null}, r.links);
        assertEquals(2, r.resendCount);
    }

    @Test
    void bytesOfTheVersionWithoutAResendCountReadAsAbsent() {
        // What a savepoint of that version holds: the same fields, ending after the links.
        SpanRecord s = new SpanRecord();
        s.spanId = "b7ad6b7169203331";
        s.links = new String[] {"aa/bb"};
        s.resendCount = 3;
        byte[] bytes = s.encode();
        SpanRecord r = SpanRecord.decode(java.util.Arrays.copyOf(bytes, bytes.length - Integer.BYTES));
        assertEquals("b7ad6b7169203331", r.spanId);
        assertArrayEquals(new String[] {"aa/bb"}, r.links);
        assertEquals(-1, r.resendCount);
    }

    @Test
    void nullsStayNull() {
        SpanRecord s = new SpanRecord();
        s.kafkaPartition = -1;
        s.kafkaOffset = -1;

        SpanRecord r = SpanRecord.decode(s.encode());

        assertNull(r.traceId);
        assertNull(r.parentSpanId);
        assertNull(r.links);
        assertNull(r.probeOf);
        assertEquals(-1, r.kafkaPartition);
        assertEquals(-1, r.kafkaOffset);
        assertEquals(-1, r.resendCount);
    }
}
