package io.stormwatch.flink.traces;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

import java.time.Duration;
import java.util.Locale;

/**
 * The span path's per-trace step, attached to a job's table environment (jobs/spans.py calls
 * {@link #register}): the view of valid spans goes through {@link TraceAssembler}, keyed by trace id,
 * and comes back as two views for the job's SQL: the window partials (event time `rowtime`, the
 * assembler's watermark) and the dead letters of late spans.
 */
public final class SpanPath {
    /** The columns the spans view must have, in this order (sql/jobs/spans.sql selects them). */
    public static final String[] SPAN_COLUMNS = {
        "trace_id", "span_id", "parent_span_id", "service_name", "service_instance_id", "span_name",
        "span_kind", "status_code", "callee", "links", "start_time_unix_nano", "end_time_unix_nano",
        "kafka_partition", "kafka_offset", "reject_reason", "dead_letter_payload"};

    private SpanPath() {}

    public static void register(StreamTableEnvironment tEnv, String spansView, String partialsView, String deadView,
                                long quietMs, long rootWaitMs, long followDelayMs, long maxHoldMs, long slideMs,
                                double[] boundsMs,
                                String sourceTopic, String job, long outOfOrdernessMs, long idleMs) {
        Table spans = tEnv.from(spansView);
        java.util.List<String> columns = spans.getResolvedSchema().getColumnNames();
        if (!columns.subList(0, Math.min(columns.size(), SPAN_COLUMNS.length)).equals(java.util.List.of(SPAN_COLUMNS))) {
            throw new IllegalArgumentException("view " + spansView + " must have the columns " + String.join(", ", SPAN_COLUMNS)
                    + " in that order, not " + columns);
        }
        SingleOutputStreamOperator<EncodedSpan> decoded = tEnv.toDataStream(spans)
                .process(new ToRecords(sourceTopic, job), TypeInformation.of(EncodedSpan.class))
                .name("spans and link probes");
        DataStream<EncodedSpan> records = decoded;
        if (outOfOrdernessMs >= 0) {
            // A view without an event-time column: the span's end, bounded out-of-orderness per subtask.
            records = records.assignTimestampsAndWatermarks(WatermarkStrategy
                    .<EncodedSpan>forBoundedOutOfOrderness(Duration.ofMillis(outOfOrdernessMs))
                    .withTimestampAssigner((r, previous) -> r.endMs)
                    .withIdleness(Duration.ofMillis(idleMs)));
        }
        SingleOutputStreamOperator<Row> partials = records
                .keyBy(r -> r.route, Types.STRING)
                .transform("assemble traces", TraceAssembler.PARTIAL_TYPE,
                        new TraceAssembler(quietMs, rootWaitMs, followDelayMs, maxHoldMs, slideMs, boundsMs,
                                sourceTopic, job))
                .uid("trace-assembler");
        tEnv.createTemporaryView(partialsView, tEnv.fromDataStream(partials, Schema.newBuilder()
                .columnByMetadata("rowtime", "TIMESTAMP_LTZ(3)")
                .watermark("rowtime", "SOURCE_WATERMARK()")
                .build()));
        // Rejected by the decoder, or not taken by the assembler: one view of the span path's dead letters.
        tEnv.createTemporaryView(deadView, tEnv.fromDataStream(decoded.getSideOutput(TraceAssembler.DEAD_LETTERS)
                .union(partials.getSideOutput(TraceAssembler.DEAD_LETTERS))));
    }

    /**
     * A row of the spans view as a {@link SpanRecord} (encoded), and one link probe per link of a CONSUMER span;
     * a row the decoder rejected goes to the dead letters with its reason instead.
     */
    static final class ToRecords extends ProcessFunction<Row, EncodedSpan> {
        private final String sourceTopic, job;

        ToRecords(String sourceTopic, String job) {
            this.sourceTopic = sourceTopic;
            this.job = job;
        }

        @Override
        public void processElement(Row row, Context ctx, Collector<EncodedSpan> out) {
            String reason = (String) row.getField(14);
            if (reason != null) {
                ctx.output(TraceAssembler.DEAD_LETTERS, Row.of(sourceTopic, (Integer) row.getField(12),
                        (Long) row.getField(13), reason, (String) row.getField(15), job));
                return;
            }
            SpanRecord s = new SpanRecord();
            s.traceId = (String) row.getField(0);
            s.spanId = (String) row.getField(1);
            s.parentSpanId = (String) row.getField(2);
            s.service = (String) row.getField(3);
            s.instance = (String) row.getField(4);
            s.name = (String) row.getField(5);
            s.kind = (String) row.getField(6);
            s.status = (String) row.getField(7);
            s.callee = (String) row.getField(8);
            Row[] links = (Row[]) row.getField(9);
            s.start = (Long) row.getField(10);
            s.end = (Long) row.getField(11);
            Integer partition = (Integer) row.getField(12);
            Long offset = (Long) row.getField(13);
            s.kafkaPartition = partition == null ? -1 : partition;
            s.kafkaOffset = offset == null ? -1 : offset;
            s.route = s.traceId;
            if (links != null && links.length > 0) {
                s.links = new String[links.length];
                for (int i = 0; i < links.length; i++) {
                    String t = links[i] == null ? null : (String) links[i].getField(0);
                    String id = links[i] == null ? null : (String) links[i].getField(1);
                    s.links[i] = t == null || id == null ? "" : t.toLowerCase(Locale.ROOT) + "/" + id.toLowerCase(Locale.ROOT);
                }
            }
            out.collect(EncodedSpan.of(s));
            if (TraceFacts.CONSUMER.equals(s.kind) && s.links != null) {
                for (String link : s.links) {
                    int slash = link.indexOf('/');
                    if (slash <= 0) continue;
                    SpanRecord probe = copy(s);
                    probe.route = link.substring(0, slash);
                    probe.probeOf = link.substring(slash + 1);
                    out.collect(EncodedSpan.of(probe));
                }
            }
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
}
