package io.stormwatch.flink.otlp;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.UnsafeByteOperations;
import com.google.protobuf.WireFormat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The spans of an otlp_proto message (opentelemetry-proto 1.3's ExportTraceServiceRequest), read field
 * by field with protobuf's CodedInputStream: nothing is built but the fields stormwatch reads. It
 * accepts and refuses exactly what the generated classes' parseFrom does, with the same messages: every
 * field of every message is read as the generated code reads it (strings checked for UTF-8 in place,
 * nested messages and groups counted against the same nesting limit of 100), unknown fields skipped as
 * the generated code skips them. OtlpDecoderTest checks that against the generated classes on
 * thousands of broken messages.
 */
final class ProtoSpans {
    // Tags: field number << 3 | wire type.
    private static final int VARINT = WireFormat.WIRETYPE_VARINT, FIXED64 = WireFormat.WIRETYPE_FIXED64,
            BYTES = WireFormat.WIRETYPE_LENGTH_DELIMITED, FIXED32 = WireFormat.WIRETYPE_FIXED32;
    private static final int RECURSION_LIMIT = 100;
    private static final byte[][] RESOURCE_KEYS = utf8(SpanFields.RESOURCE_KEYS), SPAN_KEYS = utf8(SpanFields.SPAN_KEYS),
            SPAN_INT_KEYS = utf8(SpanFields.SPAN_INT_KEYS);

    private final byte[] buf;
    private final CodedInputStream in;
    private int depth;
    final List<SpanFields> spans = new ArrayList<>();
    int resourceSpans;

    // The key/value being read: where its key and string value stand in `buf`.
    private int keyAt, keyLength, stringAt, stringLength;
    private boolean isString, isInt;
    private long intValue;
    // The link being read.
    private int linkTraceAt, linkTraceLength, linkSpanAt, linkSpanLength;

    private ProtoSpans(byte[] message) {
        this.buf = message;
        this.in = CodedInputStream.newInstance(message);
    }

    /** The spans of `message`, or the parser's exception (the generated classes' message). */
    static ProtoSpans read(byte[] message) throws IOException {
        ProtoSpans p = new ProtoSpans(message);
        p.request();
        return p;
    }

    private void request() throws IOException {
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
            if (tag == tag(1, BYTES)) {
                resourceSpans++;
                int old = enter();
                resourceSpans();
                leave(old);
            } else if (!unknown(tag)) {
                break;
            }
        }
        in.checkLastTagWas(0);
    }

    private void resourceSpans() throws IOException {
        SpanFields.FirstValues resource = new SpanFields.FirstValues(SpanFields.RESOURCE_KEYS);
        int first = spans.size();
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
            if (tag == tag(1, BYTES)) {  // resource
                int old = enter();
                for (int t = in.readTag(); t != 0; t = in.readTag()) {
                    if (t == tag(1, BYTES)) keyValue(resource, RESOURCE_KEYS, null);
                    else if (t == tag(2, VARINT)) in.readUInt32();
                    else if (!unknown(t)) break;
                }
                leave(old);
            } else if (tag == tag(2, BYTES)) {  // scope_spans
                int old = enter();
                scopeSpans();
                leave(old);
            } else if (tag == tag(3, BYTES)) {
                string();  // schema_url
            } else if (!unknown(tag)) {
                break;
            }
        }
        for (int i = first; i < spans.size(); i++) spans.get(i).resource = resource;
    }

    private void scopeSpans() throws IOException {
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
            if (tag == tag(1, BYTES)) {  // scope: name, version, attributes, dropped count
                int old = enter();
                for (int t = in.readTag(); t != 0; t = in.readTag()) {
                    if (t == tag(1, BYTES) || t == tag(2, BYTES)) string();
                    else if (t == tag(3, BYTES)) keyValue(null, null, null);
                    else if (t == tag(4, VARINT)) in.readUInt32();
                    else if (!unknown(t)) break;
                }
                leave(old);
            } else if (tag == tag(2, BYTES)) {
                int old = enter();
                span();
                leave(old);
            } else if (tag == tag(3, BYTES)) {
                string();
            } else if (!unknown(tag)) {
                break;
            }
        }
    }

    private void span() throws IOException {
        SpanFields s = new SpanFields();
        int traceAt = 0, traceLength = 0, spanAt = 0, spanLength = 0, parentAt = 0, parentLength = 0;
        int kind = 0, code = 0;
        boolean hasStatus = false;
        String statusMessage = "";
        long start = 0, end = 0;
        String name = "";
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
            switch (tag) {
                case 1 << 3 | BYTES: traceLength = bytes(); traceAt = at; break;
                case 2 << 3 | BYTES: spanLength = bytes(); spanAt = at; break;
                case 3 << 3 | BYTES: string(); break;  // trace_state
                case 4 << 3 | BYTES: parentLength = bytes(); parentAt = at; break;
                case 5 << 3 | BYTES: name = in.readStringRequireUtf8(); break;
                case 6 << 3 | VARINT: kind = in.readEnum(); break;
                case 7 << 3 | FIXED64: start = in.readFixed64(); break;
                case 8 << 3 | FIXED64: end = in.readFixed64(); break;
                case 9 << 3 | BYTES: keyValue(s.attributes, SPAN_KEYS, s.intAttributes); break;
                case 10 << 3 | VARINT: case 12 << 3 | VARINT: case 14 << 3 | VARINT: in.readUInt32(); break;
                case 11 << 3 | BYTES: event(); break;
                case 13 << 3 | BYTES: link(s); break;
                case 15 << 3 | BYTES: {  // status: a repeated one merges into the first, field by field
                    hasStatus = true;
                    int old = enter();
                    for (int t = in.readTag(); t != 0; t = in.readTag()) {
                        if (t == tag(2, BYTES)) statusMessage = in.readStringRequireUtf8();
                        else if (t == tag(3, VARINT)) code = in.readEnum();
                        else if (!unknown(t)) break;
                    }
                    leave(old);
                    break;
                }
                case 16 << 3 | FIXED32: in.readFixed32(); break;
                default:
                    if (!unknown(tag)) {
                        finish(s, traceAt, traceLength, spanAt, spanLength, parentAt, parentLength, name, kind,
                                hasStatus, code, statusMessage, start, end);
                        return;
                    }
            }
        }
        finish(s, traceAt, traceLength, spanAt, spanLength, parentAt, parentLength, name, kind, hasStatus, code,
                statusMessage, start, end);
    }

    private void finish(SpanFields s, int traceAt, int traceLength, int spanAt, int spanLength, int parentAt,
                        int parentLength, String name, int kind, boolean hasStatus, int code, String statusMessage,
                        long start, long end) {
        s.traceId = hex(traceAt, traceLength);
        s.spanId = hex(spanAt, spanLength);
        s.parentSpanId = hex(parentAt, parentLength);
        s.name = name;
        s.kind = OtlpDecoder.kindName(kind);
        s.statusCode = OtlpDecoder.codeName(hasStatus ? code : 0);
        s.statusMessage = hasStatus ? statusMessage : null;
        s.start = start;
        s.end = end;
        spans.add(s);
    }

    private void event() throws IOException {
        int old = enter();
        for (int t = in.readTag(); t != 0; t = in.readTag()) {
            if (t == tag(1, FIXED64)) in.readFixed64();
            else if (t == tag(2, BYTES)) string();
            else if (t == tag(3, BYTES)) keyValue(null, null, null);
            else if (t == tag(4, VARINT)) in.readUInt32();
            else if (!unknown(t)) break;
        }
        leave(old);
    }

    private void link(SpanFields s) throws IOException {
        int old = enter();
        linkTraceAt = linkTraceLength = linkSpanAt = linkSpanLength = 0;
        for (int t = in.readTag(); t != 0; t = in.readTag()) {
            if (t == tag(1, BYTES)) { linkTraceLength = bytes(); linkTraceAt = at; }
            else if (t == tag(2, BYTES)) { linkSpanLength = bytes(); linkSpanAt = at; }
            else if (t == tag(3, BYTES)) string();
            else if (t == tag(4, BYTES)) keyValue(null, null, null);
            else if (t == tag(5, VARINT)) in.readUInt32();
            else if (t == tag(6, FIXED32)) in.readFixed32();
            else if (!unknown(t)) break;
        }
        leave(old);
        s.links.add(new String[] {hex(linkTraceAt, linkTraceLength), hex(linkSpanAt, linkSpanLength)});
    }

    /**
     * A KeyValue; offered to `values` (when stormwatch reads any of `keys`) once it is whole, and to `ints`
     * (a span's integer attributes, SPAN_INT_KEYS) when given.
     */
    private void keyValue(SpanFields.FirstValues values, byte[][] keys, SpanFields.FirstValues ints) throws IOException {
        int old = enter();
        keyAt = keyLength = 0;
        isString = isInt = false;
        for (int t = in.readTag(); t != 0; t = in.readTag()) {
            if (t == tag(1, BYTES)) {
                keyLength = string();
                keyAt = at;
            } else if (t == tag(2, BYTES)) {
                int o = enter();
                anyValue(true);  // a repeated value merges into the first: the last oneof member set wins
                leave(o);
            } else if (!unknown(t)) {
                break;
            }
        }
        leave(old);
        if (values != null) {
            for (int i = 0; i < keys.length; i++) {
                if (equal(keys[i], keyAt, keyLength)) {
                    values.offer(i, isString ? new String(buf, stringAt, stringLength, StandardCharsets.UTF_8) : null);
                    break;  // keys are distinct
                }
            }
        }
        if (ints != null) {
            for (int i = 0; i < SPAN_INT_KEYS.length; i++) {
                if (equal(SPAN_INT_KEYS[i], keyAt, keyLength)) {
                    ints.offer(i, isInt ? Long.toString(intValue) : null);
                    break;
                }
            }
        }
    }

    /** An AnyValue; `top`: the value of the key/value being read (not one nested in an array or list). */
    private void anyValue(boolean top) throws IOException {
        for (int t = in.readTag(); t != 0; t = in.readTag()) {
            switch (t) {
                case 1 << 3 | BYTES: {
                    int length = string();
                    if (top) { isString = true; isInt = false; stringAt = at; stringLength = length; }
                    break;
                }
                case 2 << 3 | VARINT: in.readBool(); if (top) isString = isInt = false; break;
                case 3 << 3 | VARINT: {
                    long v = in.readInt64();
                    if (top) { isString = false; isInt = true; intValue = v; }
                    break;
                }
                case 4 << 3 | FIXED64: in.readDouble(); if (top) isString = isInt = false; break;
                case 5 << 3 | BYTES: case 6 << 3 | BYTES: {  // array_value, kvlist_value
                    if (top) isString = isInt = false;
                    boolean list = t == (6 << 3 | BYTES);
                    int old = enter();
                    for (int u = in.readTag(); u != 0; u = in.readTag()) {
                        if (u == tag(1, BYTES)) {
                            if (list) {
                                int k = keyAt, kl = keyLength, sa = stringAt, sl = stringLength;
                                boolean s = isString, n = isInt;
                                long v = intValue;
                                keyValue(null, null, null);
                                keyAt = k; keyLength = kl; stringAt = sa; stringLength = sl; isString = s; isInt = n;
                                intValue = v;
                            } else {
                                int o = enter();
                                anyValue(false);
                                leave(o);
                            }
                        } else if (!unknown(u)) {
                            break;
                        }
                    }
                    leave(old);
                    break;
                }
                case 7 << 3 | BYTES: bytes(); if (top) isString = isInt = false; break;
                default:
                    if (!unknown(t)) return;
            }
        }
    }

    // -- as the generated code reads ------------------------------------------------------------

    /** Where the last bytes()/string() stand in `buf`. */
    private int at;

    private static int tag(int field, int wireType) {
        return field << 3 | wireType;
    }

    /** CodedInputStream.readMessage up to the nested message's fields: its length, the nesting limit, the limit. */
    private int enter() throws IOException {
        int length = in.readRawVarint32();
        if (depth >= RECURSION_LIMIT) throw recursion();
        int old = in.pushLimit(length);
        depth++;
        return old;
    }

    /** ... and after them. */
    private void leave(int oldLimit) throws IOException {
        in.checkLastTagWas(0);
        depth--;
        if (in.getBytesUntilLimit() != 0) throw truncated();
        in.popLimit(oldLimit);
    }

    /** A bytes field, in place: its length (`at`: where it starts). */
    private int bytes() throws IOException {
        int length = in.readRawVarint32();
        at = in.getTotalBytesRead();
        in.skipRawBytes(length);  // negative or past the end: the same exceptions as readBytes
        return length;
    }

    /** A proto3 string field, in place, checked for UTF-8 as readStringRequireUtf8 checks it. */
    private int string() throws IOException {
        int length = bytes();
        if (length > 0 && !UnsafeByteOperations.unsafeWrap(buf, at, length).isValidUtf8()) {
            throw new InvalidProtocolBufferException("Protocol message had invalid UTF-8.");
        }
        return length;
    }

    /** An unknown field, skipped as UnknownFieldSet reads it; false on an end-group tag. */
    private boolean unknown(int tag) throws IOException {
        switch (WireFormat.getTagWireType(tag)) {
            case WireFormat.WIRETYPE_VARINT: in.readInt64(); return true;
            case WireFormat.WIRETYPE_FIXED64: in.readFixed64(); return true;
            case WireFormat.WIRETYPE_LENGTH_DELIMITED: bytes(); return true;
            case WireFormat.WIRETYPE_START_GROUP: {
                if (depth >= RECURSION_LIMIT) throw recursion();
                depth++;
                for (int t = in.readTag(); t != 0 && unknown(t); t = in.readTag()) {
                    // skipped
                }
                in.checkLastTagWas(tag(WireFormat.getTagFieldNumber(tag), WireFormat.WIRETYPE_END_GROUP));
                depth--;
                return true;
            }
            case WireFormat.WIRETYPE_END_GROUP: return false;
            case WireFormat.WIRETYPE_FIXED32: in.readFixed32(); return true;
            default: throw new InvalidProtocolBufferException("Protocol message tag had invalid wire type.");
        }
    }

    private static InvalidProtocolBufferException recursion() {
        return new InvalidProtocolBufferException("Protocol message had too many levels of nesting.  May be malicious.  "
                + "Use setRecursionLimit() to increase the recursion depth limit.");
    }

    private static InvalidProtocolBufferException truncated() {
        return new InvalidProtocolBufferException("While parsing a protocol message, the input ended unexpectedly in the "
                + "middle of a field.  This could mean either that the input has been truncated or that an embedded "
                + "message misreported its own length.");
    }

    private boolean equal(byte[] key, int at, int length) {
        if (key.length != length) return false;
        for (int i = 0; i < length; i++) {
            if (buf[at + i] != key[i]) return false;
        }
        return true;
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private String hex(int at, int length) {
        char[] out = new char[length * 2];
        for (int i = 0; i < length; i++) {
            byte b = buf[at + i];
            out[2 * i] = HEX[(b >> 4) & 0xf];
            out[2 * i + 1] = HEX[b & 0xf];
        }
        return new String(out);
    }

    private static byte[][] utf8(String[] keys) {
        byte[][] out = new byte[keys.length][];
        for (int i = 0; i < keys.length; i++) out[i] = keys[i].getBytes(StandardCharsets.UTF_8);
        return out;
    }
}
