package io.stormwatch.flink.traces;

/**
 * One span as the trace assembler keeps it in keyed state: the fields every per-trace fact reads.
 * A POJO (public fields, no-arg constructor), so Flink serializes it without Kryo. Times in ns.
 *
 * A record with {@code probeOf} set is not a span of this trace but a link probe: a CONSUMER span of
 * some trace (possibly another) that names the span {@code probeOf} of this trace in its links. It is
 * routed to the linked trace's key, so the producer's trace pairs it with the producer when it is
 * assembled (messaging edges across traces without a join).
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

    public SpanRecord() {}

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
