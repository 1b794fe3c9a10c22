package io.stormwatch.flink;

import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.functions.ScalarFunction;
import org.apache.flink.types.Row;

/**
 * HEX_LINKS(links): an OTLP protobuf span's links (trace and span ids as bytes) with their ids in
 * lowercase hex, as OTLP JSON writes them: the `links` column of stormwatch_spans for both encodings.
 * A per-element map, which Flink SQL cannot write over an array.
 */
public class HexLinks extends ScalarFunction {
    public @DataTypeHint("ARRAY<ROW<trace_id STRING, span_id STRING>>") Row[] eval(
            @DataTypeHint("ARRAY<ROW<trace_id BYTES, span_id BYTES>>") Row[] links) {
        if (links == null) {
            return null;
        }
        Row[] out = new Row[links.length];
        for (int i = 0; i < links.length; i++) {
            Row link = links[i];
            out[i] = link == null ? null
                    : Row.of(HexBytes.hex((byte[]) link.getField(0)), HexBytes.hex((byte[]) link.getField(1)));
        }
        return out;
    }
}
