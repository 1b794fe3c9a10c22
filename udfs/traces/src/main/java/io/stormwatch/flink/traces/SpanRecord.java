package io.stormwatch.flink.traces;

import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * One span as the trace assembler keeps it in keyed state: the fields every per-trace fact reads.
 * A POJO (public fields, no-arg constructor), so Flink serializes it without Kryo. Times in ns.
 *
 * A record with {@code probeOf} set is not a span of this trace but a link probe: a CONSUMER span of
 * some trace (possibly another) that names the span {@code probeOf} of this trace in its links. It is
 * routed to the linked trace's key, so the producer's trace pairs it with the producer when it is
 * assembled (messaging edges across traces without a join).
 *
 * In keyed state a record is kept as the bytes of {@link #encode()}: a checkpoint of the heap state
 * backend then copies each held span as one array, where Flink's POJO serializer writes every string
 * a character at a time (most of the span path's checkpoint cost, measured: bench/README.md).
 */
public class SpanRecord {
    public String traceId;
    public String spanId;
    public String parentSpanId;
    public String service;
    public String instance;
    public String name;
    public String kind;
    public String status;
    /** Who an untraced CLIENT call went to: peer.service, else db.system, else server.address. */
    public String callee;
    public long start;
    public long end;
    /** Links as "traceid/spanid", lower case. */
    public String[] links;
    /** For a link probe: the span id (in this trace) it links to; null for a span. */
    public String probeOf;
    /** The trace id this record is keyed by: its own, or for a probe the linked trace. */
    public String route;
    public int kafkaPartition;
    public long kafkaOffset;
    /** http.request.resend_count: how often the client had sent the request before; -1 when absent. */
    public int resendCount = -1;

    public SpanRecord() {}

    /** This record as compact bytes: strings as UTF-8 with their length (-1 for null), numbers as is. */
    public byte[] encode() {
        DataOutputSerializer out = new DataOutputSerializer(256);
        try {
            for (String f : new String[] {traceId, spanId, parentSpanId, service, instance, name, kind, status, callee,
                    probeOf, route}) {
                writeString(out, f);
            }
            out.writeLong(start);
            out.writeLong(end);
            out.writeInt(kafkaPartition);
            out.writeLong(kafkaOffset);
            out.writeInt(links == null ? -1 : links.length);
            if (links != null) {
                for (String link : links) writeString(out, link);
            }
            out.writeInt(resendCount);  // last: bytes of a version without it end before
        } catch (IOException e) {
            throw new UncheckedIOException(e); // an in-memory buffer: cannot happen
        }
        return out.getCopyOfBuffer();
    }

    /** The record {@link #encode()} made these bytes of. */
    public static SpanRecord decode(byte[] bytes) {
        DataInputDeserializer in = new DataInputDeserializer(bytes);
        SpanRecord r = new SpanRecord();
        try {
            r.traceId = readString(in);
            r.spanId = readString(in);
            r.parentSpanId = readString(in);
            r.service = readString(in);
            r.instance = readString(in);
            r.name = readString(in);
            r.kind = readString(in);
            r.status = readString(in);
            r.callee = readString(in);
            r.probeOf = readString(in);
            r.route = readString(in);
            r.start = in.readLong();
            r.end = in.readLong();
            r.kafkaPartition = in.readInt();
            r.kafkaOffset = in.readLong();
            int links = in.readInt();
            if (links >= 0) {
                r.links = new String[links];
                for (int i = 0; i < links; i++) r.links[i] = readString(in);
            }
            // Spans kept in state by a version that had no resend count: absent.
            r.resendCount = in.available() >= Integer.BYTES ? in.readInt() : -1;
        } catch (IOException e) {
            throw new UncheckedIOException("span record bytes that encode() did not make", e);
        }
        return r;
    }

    private static void writeString(DataOutputSerializer out, String s) throws IOException {
        if (s == null) {
            out.writeInt(-1);
            return;
        }
        byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(utf8.length);
        out.write(utf8);
    }

    private static String readString(DataInputDeserializer in) throws IOException {
        int n = in.readInt();
        if (n < 0) return null;
        byte[] utf8 = new byte[n];
        in.readFully(utf8);
        return new String(utf8, StandardCharsets.UTF_8);
    }

    public boolean error() {
        return "STATUS_CODE_ERROR".equals(status);
    }

    public double durationMs() {
        return (end - start) / 1e6;
    }

    public long endMs() {
        return Math.floorDiv(end, 1_000_000L);
    }

    public boolean isRoot() {
        return parentSpanId == null;
    }

    public boolean selfParent() {
        return spanId.equals(parentSpanId);
    }

    public boolean hasLinks() {
        return links != null && links.length > 0;
    }
}
