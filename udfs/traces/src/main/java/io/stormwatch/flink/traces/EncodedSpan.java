package io.stormwatch.flink.traces;

/**
 * A span record on its way to the trace assembler: its key, its end, and the record as
 * {@link SpanRecord#encode()}'s bytes. Flink serializes this POJO as one string, one long and one
 * array across the keyBy, where a {@link SpanRecord} costs a dozen strings written a character at a
 * time; the assembler keeps the bytes as they came, and decides what to do with a record from these
 * fields alone (it decodes the bytes once, when the trace is assembled).
 */
public class EncodedSpan {
    /** The trace id this record is keyed by (SpanRecord.route). */
    public String route;
    /** The span's end in ms: its event time. */
    public long endMs;
    /** A link probe (SpanRecord.probeOf set), not a span of the trace it is keyed by. */
    public boolean probe;
    /** A PRODUCER span: its trace waits for the consumers linking to it. */
    public boolean producer;
    /** A span without a parent: its trace is not done before it came (or `rootWait` passed). */
    public boolean root;
    public byte[] bytes;

    public EncodedSpan() {}

    public static EncodedSpan of(SpanRecord s) {
        EncodedSpan e = new EncodedSpan();
        e.route = s.route;
        e.endMs = s.endMs();
        e.probe = s.probeOf != null;
        e.producer = !e.probe && TraceFacts.PRODUCER.equals(s.kind);
        e.root = !e.probe && s.parentSpanId == null;
        e.bytes = s.encode();
        return e;
    }
}
