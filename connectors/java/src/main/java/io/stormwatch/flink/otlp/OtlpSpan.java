package io.stormwatch.flink.otlp;

import java.util.List;

/**
 * One span as the decoder judged it (or a whole message that does not decode), before it becomes a row of
 * format 'otlp' ({@link SpanRows#row}) or a record of the span path (io.stormwatch.flink.traces): the same
 * values either way. A valid span has no {@link #reason}; its ids are lower case, an empty parent id is
 * none. A rejected span has its reason and {@link #payload} (its ids, names and times as JSON); a message
 * that does not decode has only those two.
 */
public final class OtlpSpan {
    public String traceId, spanId, parentSpanId, service, instance, name, kind, status, statusMessage;
    /** The attributes stormwatch reads: peer.service (or its current name), db.system (same), server.address. */
    public String peerService, dbSystem, serverAddress;
    /** http.request.resend_count: how often the client had sent this request before; null when absent. */
    public Long resendCount;
    /** A valid span's links, (trace id, span id) pairs, lower case; null for a rejected one. */
    public List<String[]> links;
    /** Times in ns, as sent (null when absent); set for a valid span. */
    public Long start, end;
    public String reason, payload;

    static OtlpSpan message(String reason, String payload) {
        OtlpSpan s = new OtlpSpan();
        s.reason = reason;
        s.payload = payload;
        return s;
    }
}
