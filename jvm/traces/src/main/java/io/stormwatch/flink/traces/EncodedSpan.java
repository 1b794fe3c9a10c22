package io.stormwatch.flink.traces;

/**
 * A span record on its way to the trace assembler: its key, its end, and the record as
 * {@link SpanRecord#encode()}'s bytes. Flink serializes this POJO as one string, one long and one
 * array across the keyBy, where a {@link SpanRecord} costs a dozen strings written a character at a
 * time; the assembler keeps the bytes as they came.
 */
public class EncodedSpan {
    /** The trace id this record is keyed by (SpanRecord.route). */
    public String route;
    /** The span's end in ms: its event time. */
    public long endMs;
    public byte[] bytes;

    public EncodedSpan() {}

    public static EncodedSpan of(SpanRecord s) {
        EncodedSpan e = new EncodedSpan();
        e.route = s.route;
        e.endMs = s.endMs();
        e.bytes = s.encode();
        return e;
    }
}
