package io.stormwatch.flink.otlp;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.table.api.ValidationException;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.format.DecodingFormat;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DeserializationFormatFactory;
import org.apache.flink.table.factories.DynamicTableFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.types.DataType;

import java.util.Locale;
import java.util.Set;

/**
 * Format 'otlp': a Kafka message holding an OTLP ExportTraceServiceRequest, as the OpenTelemetry
 * Collector's kafka exporter writes it, read as one row per span (columns: SpanRows.ROW), each valid or
 * rejected with its reason, plus one row per message that does not decode. Registered by SPI
 * (META-INF/services/org.apache.flink.table.factories.Factory).
 *
 * <pre>
 *   'format' = 'otlp',
 *   'otlp.encoding' = 'auto',              -- the default: each message by its first byte ('{' is OTLP JSON);
 *                                          -- or 'otlp_json' | 'otlp_proto', as the exporter's `encoding`
 *   'otlp.future-limit-seconds' = '3600',  -- spans ending further ahead of the clock are rejected
 *   'otlp.payload-max-chars' = '65536'     -- a whole message's dead-letter payload is cut to this
 * </pre>
 */
public final class OtlpFormatFactory implements DeserializationFormatFactory {
    public static final String IDENTIFIER = "otlp";

    public static final ConfigOption<String> ENCODING = ConfigOptions.key("encoding").stringType().defaultValue("auto")
            .withDescription("How the messages are encoded: auto (each message by its first byte: '{' after optional "
                    + "whitespace is OTLP JSON, anything else protobuf), or one of them as the Collector's kafka exporter "
                    + "names it: otlp_json or otlp_proto.");
    public static final ConfigOption<Long> FUTURE_LIMIT_SECONDS = ConfigOptions.key("future-limit-seconds").longType()
            .defaultValue(3600L).withDescription("Spans ending more than this many seconds ahead of the wall clock are rejected.");
    public static final ConfigOption<Integer> PAYLOAD_MAX_CHARS = ConfigOptions.key("payload-max-chars").intType()
            .defaultValue(65536).withDescription("A message that does not decode is kept in its row cut to this many characters.");

    @Override
    public String factoryIdentifier() {
        return IDENTIFIER;
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        return Set.of();
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        return Set.of(ENCODING, FUTURE_LIMIT_SECONDS, PAYLOAD_MAX_CHARS);
    }

    @Override
    public DecodingFormat<DeserializationSchema<RowData>> createDecodingFormat(DynamicTableFactory.Context context,
                                                                              ReadableConfig options) {
        FactoryUtil.validateFactoryOptions(this, options);
        OtlpDecoder.Encoding encoding = encoding(options.get(ENCODING));
        long futureLimit = options.get(FUTURE_LIMIT_SECONDS);
        int payloadMaxChars = options.get(PAYLOAD_MAX_CHARS);
        if (futureLimit < 0 || payloadMaxChars < 0) {
            throw new ValidationException("'" + IDENTIFIER + ".future-limit-seconds' and '" + IDENTIFIER
                    + ".payload-max-chars' must not be negative");
        }
        return new DecodingFormat<>() {
            @Override
            public DeserializationSchema<RowData> createRuntimeDecoder(DynamicTableSource.Context source, DataType physical) {
                checkColumns(physical);
                return new OtlpDeserializationSchema(encoding, futureLimit, payloadMaxChars,
                        source.createTypeInformation(physical));
            }

            @Override
            public ChangelogMode getChangelogMode() {
                return ChangelogMode.insertOnly();
            }
        };
    }

    static OtlpDecoder.Encoding encoding(String value) {
        switch (value) {
            case "otlp_json": return OtlpDecoder.Encoding.OTLP_JSON;
            case "otlp_proto": return OtlpDecoder.Encoding.OTLP_PROTO;
            case "auto": return OtlpDecoder.Encoding.AUTO;
            default:
                throw new ValidationException("'" + IDENTIFIER + ".encoding' = '" + value
                        + "': format 'otlp' reads auto (either, decided per message), otlp_json or otlp_proto");
        }
    }

    /** The table's physical columns must be exactly the rows this format makes. */
    static void checkColumns(DataType physical) {
        // The row itself comes NOT NULL from the planner; its columns must be as declared here.
        if (!physical.getLogicalType().copy(true).equals(SpanRows.ROW.getLogicalType())) {
            throw new ValidationException(String.format(Locale.ROOT,
                    "format 'otlp' makes rows of the physical columns%n  %s%nbut the table declares%n  %s%n"
                            + "(metadata and computed columns aside: declare exactly these, in this order)",
                    SpanRows.ROW.getLogicalType().asSummaryString(), physical.getLogicalType().asSummaryString()));
        }
    }
}
