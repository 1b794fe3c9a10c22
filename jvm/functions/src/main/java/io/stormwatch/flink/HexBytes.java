package io.stormwatch.flink;

import org.apache.flink.table.functions.ScalarFunction;

/**
 * HEX_BYTES(bytes): lowercase hex digits of a byte string, as OTLP JSON writes trace and span ids.
 * Flink SQL's HEX takes only integers and strings; OTLP protobuf carries ids as raw bytes.
 */
public class HexBytes extends ScalarFunction {
    private static final char[] DIGITS = "0123456789abcdef".toCharArray();

    public String eval(byte[] bytes) {
        return hex(bytes);
    }

    static String hex(byte[] bytes) {
        if (bytes == null) {
            return null;
        }
        char[] out = new char[bytes.length * 2];
        for (int i = 0; i < bytes.length; i++) {
            out[2 * i] = DIGITS[(bytes[i] >> 4) & 0xf];
            out[2 * i + 1] = DIGITS[bytes[i] & 0xf];
        }
        return new String(out);
    }
}
