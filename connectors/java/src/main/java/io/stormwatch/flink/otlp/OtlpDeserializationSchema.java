package io.stormwatch.flink.otlp;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.table.data.RowData;
import org.apache.flink.util.Collector;

/**
 * The runtime side of format 'otlp': each Kafka message to its rows (OtlpDecoder), and the counts of
 * what was rejected as metrics of the source (otlpSpans, otlpRejectedSpans, otlpRejectedMessages).
 */
public final class OtlpDeserializationSchema implements DeserializationSchema<RowData> {
    private static final long serialVersionUID = 1L;

    private final OtlpDecoder.Encoding encoding;
    private final long futureLimitSeconds;
    private final int payloadMaxChars;
    private final TypeInformation<RowData> producedType;
    private transient OtlpDecoder decoder;

    OtlpDeserializationSchema(OtlpDecoder.Encoding encoding, long futureLimitSeconds, int payloadMaxChars,
                              TypeInformation<RowData> producedType) {
        this.encoding = encoding;
        this.futureLimitSeconds = futureLimitSeconds;
        this.payloadMaxChars = payloadMaxChars;
        this.producedType = producedType;
    }

    @Override
    public void open(InitializationContext context) {
        decoder().countInto(context.getMetricGroup());
    }

    private OtlpDecoder decoder() {
        if (decoder == null) {
            decoder = new OtlpDecoder(encoding, futureLimitSeconds, payloadMaxChars,
                    () -> System.currentTimeMillis() / 1000);
        }
        return decoder;
    }

    @Override
    public void deserialize(byte[] message, Collector<RowData> out) {
        decoder().decode(message, out::collect);
    }

    @Override
    public RowData deserialize(byte[] message) {
        throw new UnsupportedOperationException("format 'otlp' gives one row per span: call deserialize(byte[], Collector)");
    }

    @Override
    public boolean isEndOfStream(RowData nextElement) {
        return false;
    }

    @Override
    public TypeInformation<RowData> getProducedType() {
        return producedType;
    }
}
