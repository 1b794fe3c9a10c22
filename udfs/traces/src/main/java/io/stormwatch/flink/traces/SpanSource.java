package io.stormwatch.flink.traces;

import io.stormwatch.flink.otlp.OtlpDecoder;
import io.stormwatch.flink.otlp.OtlpSpan;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.flink.util.Collector;

import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;

/**
 * The span path's source: the OTLP trace messages of a Kafka topic decoded straight into span records for
 * the trace assembler ({@link EncodedSpan}: route, end, record bytes), where the table source with format
 * 'otlp' made 18-column rows that SQL then projected, checked and converted back (most of the per-span
 * cost before the assembler, measured: bench/README.md). The same decoder ({@link OtlpDecoder}), the same
 * checks and reasons: a rejected span or a message that does not decode is a {@link Record} with its reason
 * and payload, for the dead letters. The same watermarks as the table's `WATERMARK FOR end_time AS end_time
 * - bound` pushed into its Kafka source: per partition, the greatest span end read less the bound (a
 * rejected span or message counts as end 0), emitted periodically, idle after the table's idle timeout.
 */
public final class SpanSource {
    private SpanSource() {}

    /** What the source reads: a span record or link probe, or (span null) a dead letter's fields. */
    public static class Record {
        public EncodedSpan span;
        public String reason;
        public String payload;
        public int partition;
        public long offset;

        public Record() {}
    }

    /**
     * The Kafka source of `options`: the WITH options a Kafka table on the topic would have (connectors/kafka.py
     * `flink_options`): 'topic', 'properties.*', 'scan.startup.mode' (earliest-offset, group-offsets, the
     * latter starting where 'properties.auto.offset.reset' says when the group has no offsets, or timestamp
     * with 'scan.startup.timestamp-millis': each partition from its first record written at or after it) and
     * optionally 'scan.bounded.mode' = 'latest-offset'. Any other option is refused: none is silently ignored.
     */
    public static KafkaSource<Record> kafka(Map<String, String> options, String encoding, long futureLimitSeconds,
                                            int payloadMaxChars) {
        Properties properties = new Properties();
        String topic = null, startup = "group-offsets", bounded = null, startupMillis = null;
        for (Map.Entry<String, String> o : options.entrySet()) {
            String key = o.getKey();
            if (key.startsWith("properties.")) properties.setProperty(key.substring("properties.".length()), o.getValue());
            else if (key.equals("topic")) topic = o.getValue();
            else if (key.equals("scan.startup.mode")) startup = o.getValue();
            else if (key.equals("scan.bounded.mode")) bounded = o.getValue();
            else if (key.equals("scan.startup.timestamp-millis")) startupMillis = o.getValue();
            else if (!(key.equals("connector") && o.getValue().equals("kafka"))) {
                throw new IllegalArgumentException("the span path's Kafka source does not take the option '" + key + "'");
            }
        }
        if (topic == null) throw new IllegalArgumentException("the span path's Kafka source needs a 'topic'");
        if (!startup.equals("earliest-offset") && !startup.equals("group-offsets") && !startup.equals("timestamp")) {
            throw new IllegalArgumentException("scan.startup.mode '" + startup + "': the span path's source takes "
                    + "earliest-offset, group-offsets or timestamp");
        }
        if (startup.equals("timestamp") != (startupMillis != null)) {
            throw new IllegalArgumentException("'scan.startup.timestamp-millis' goes with scan.startup.mode "
                    + "'timestamp', and only with it");
        }
        if (bounded != null && !bounded.equals("latest-offset")) {
            throw new IllegalArgumentException("scan.bounded.mode '" + bounded + "': the span path's source takes latest-offset");
        }
        Deserializer deserializer = new Deserializer(encoding, futureLimitSeconds, payloadMaxChars);
        KafkaSourceBuilder<Record> builder = KafkaSource.<Record>builder()
                .setTopics(topic)
                .setProperties(properties)
                .setDeserializer(deserializer);
        if (startup.equals("earliest-offset")) {
            builder.setStartingOffsets(OffsetsInitializer.earliest());
        } else if (startup.equals("timestamp")) {
            builder.setStartingOffsets(OffsetsInitializer.timestamp(Long.parseLong(startupMillis)));
        } else {
            // As the table source: a partition without committed offsets starts where auto.offset.reset says.
            String reset = properties.getProperty("auto.offset.reset", "none").toUpperCase(Locale.ROOT);
            builder.setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.valueOf(reset)));
        }
        if (bounded != null) builder.setBounded(OffsetsInitializer.latest());
        return builder.build();
    }

    /**
     * The table's watermarks: per partition (the source's split), the greatest span end less
     * `outOfOrdernessMs`, from Long.MIN_VALUE; idle after `idleMs` without records (none if 0).
     */
    public static WatermarkStrategy<Record> watermarks(long outOfOrdernessMs, long idleMs) {
        WatermarkStrategy<Record> strategy = WatermarkStrategy
                .<Record>forGenerator(context -> new EndWatermarks(outOfOrdernessMs))
                .withTimestampAssigner((r, previous) -> timestamp(r));
        return idleMs > 0 ? strategy.withIdleness(Duration.ofMillis(idleMs)) : strategy;
    }

    /** A span's end in ms; 0 for a dead letter (the table's rejected rows have end 0: they never move the watermark). */
    static long timestamp(Record r) {
        return r.span == null ? 0L : r.span.endMs;
    }

    /** Table SQL's watermark generator for `rowtime - bound`: the greatest so far, emitted periodically. */
    static final class EndWatermarks implements WatermarkGenerator<Record> {
        private final long bound;
        private long current = Long.MIN_VALUE;

        EndWatermarks(long bound) {
            this.bound = bound;
        }

        @Override
        public void onEvent(Record event, long timestamp, WatermarkOutput output) {
            current = Math.max(current, timestamp - bound);
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            output.emitWatermark(new Watermark(current));
        }
    }

    /** Each Kafka message to its span records and link probes, and dead letters; counts as the format did. */
    static final class Deserializer implements KafkaRecordDeserializationSchema<Record> {
        private static final long serialVersionUID = 1L;

        private final String encoding;
        private final long futureLimitSeconds;
        private final int payloadMaxChars;
        private transient OtlpDecoder decoder;

        Deserializer(String encoding, long futureLimitSeconds, int payloadMaxChars) {
            this.encoding = encoding;
            this.futureLimitSeconds = futureLimitSeconds;
            this.payloadMaxChars = payloadMaxChars;
            OtlpDecoder.encoding(encoding);  // refused now, not when the job runs
        }

        @Override
        public void open(DeserializationSchema.InitializationContext context) {
            decoder().countInto(context.getMetricGroup());
        }

        private OtlpDecoder decoder() {
            if (decoder == null) {
                decoder = new OtlpDecoder(OtlpDecoder.encoding(encoding), futureLimitSeconds, payloadMaxChars,
                        () -> System.currentTimeMillis() / 1000);
            }
            return decoder;
        }

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> message, Collector<Record> out) {
            records(decoder(), message.value(), message.partition(), message.offset(), out::collect);
        }

        @Override
        public TypeInformation<Record> getProducedType() {
            return TypeInformation.of(Record.class);
        }
    }

    /** The records of one message at (partition, offset). */
    static void records(OtlpDecoder decoder, byte[] message, int partition, long offset, Consumer<Record> out) {
        decoder.spans(message, s -> {
            if (s.reason != null) {
                Record dead = new Record();
                dead.reason = s.reason;
                dead.payload = s.payload;
                dead.partition = partition;
                dead.offset = offset;
                out.accept(dead);
                return;
            }
            SpanRecord r = record(s, partition, offset);
            out.accept(of(EncodedSpan.of(r)));
            if (TraceFacts.CONSUMER.equals(r.kind) && r.links != null) {
                for (String link : r.links) {
                    int slash = link.indexOf('/');
                    if (slash <= 0) continue;
                    SpanRecord probe = copy(r);
                    probe.route = link.substring(0, slash);
                    probe.probeOf = link.substring(slash + 1);
                    out.accept(of(EncodedSpan.of(probe)));
                }
            }
        });
    }

    private static Record of(EncodedSpan span) {
        Record r = new Record();
        r.span = span;
        return r;
    }

    /**
     * A valid span as the assembler keeps it. `callee`: who a CLIENT span calls when nobody traced answers
     * it, as the semantic conventions name it: peer service, else database, else address, else 'unknown'.
     */
    static SpanRecord record(OtlpSpan o, int partition, long offset) {
        SpanRecord s = new SpanRecord();
        s.traceId = o.traceId;
        s.spanId = o.spanId;
        s.parentSpanId = o.parentSpanId;
        s.service = o.service;
        s.instance = o.instance;
        s.name = o.name;
        s.kind = o.kind;
        s.status = o.status;
        s.callee = o.peerService != null ? o.peerService : o.dbSystem != null ? o.dbSystem
                : o.serverAddress != null ? o.serverAddress : "unknown";
        s.start = o.start;
        s.end = o.end;
        s.resendCount = o.resendCount == null ? -1 : (int) Math.min(o.resendCount, Integer.MAX_VALUE);
        s.kafkaPartition = partition;
        s.kafkaOffset = offset;
        s.route = s.traceId;
        if (!o.links.isEmpty()) {
            s.links = new String[o.links.size()];
            for (int i = 0; i < s.links.length; i++) {
                String[] link = o.links.get(i);
                s.links[i] = link[0] == null || link[1] == null ? "" : link[0] + "/" + link[1];
            }
        }
        return s;
    }

    private static SpanRecord copy(SpanRecord s) {
        SpanRecord p = new SpanRecord();
        p.traceId = s.traceId;
        p.spanId = s.spanId;
        p.parentSpanId = s.parentSpanId;
        p.service = s.service;
        p.instance = s.instance;
        p.name = s.name;
        p.kind = s.kind;
        p.status = s.status;
        p.start = s.start;
        p.end = s.end;
        p.kafkaPartition = s.kafkaPartition;
        p.kafkaOffset = s.kafkaOffset;
        return p;
    }
}
