package io.stormwatch.flink.traces;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

import java.util.Map;

/**
 * The span path's per-trace step, attached to a job's table environment (jobs/spans.py calls
 * {@link #register}): the topic's messages, decoded straight into span records by {@link SpanSource},
 * go through {@link TraceAssembler}, keyed by trace id, and come back as two views for the job's SQL:
 * the window partials (event time `rowtime`, the assembler's watermark) and the dead letters (spans and
 * messages the decoder rejected, late spans).
 */
public final class SpanPath {
    private SpanPath() {}

    /**
     * `sourceOptions`: the Kafka table options of the source topic ({@link SpanSource#kafka}); `encoding`,
     * `futureLimitSeconds`, `payloadMaxChars` as format 'otlp' takes them; the watermark's bound and idle
     * timeout as the table's; `marks`: progress marks per slide boundary ({@link TraceAssembler},
     * {@link WriterPartitioner#marksPerBoundary}).
     */
    public static void register(StreamTableEnvironment tEnv, StreamExecutionEnvironment env,
                                Map<String, String> sourceOptions, String encoding, long futureLimitSeconds,
                                int payloadMaxChars, String partialsView, String deadView,
                                long quietMs, long rootWaitMs, long followDelayMs, long maxHoldMs, long slideMs,
                                double[] boundsMs,
                                String sourceTopic, String job, long outOfOrdernessMs, long idleMs, int marks) {
        SingleOutputStreamOperator<EncodedSpan> decoded = env
                .fromSource(SpanSource.kafka(sourceOptions, encoding, futureLimitSeconds, payloadMaxChars),
                        SpanSource.watermarks(outOfOrdernessMs, idleMs), "otlp_spans")
                .uid("otlp-spans-source")
                .process(new Split(sourceTopic, job), TypeInformation.of(EncodedSpan.class))
                .name("spans and link probes")
                .uid("spans-and-link-probes");
        SingleOutputStreamOperator<Row> partials = decoded
                .keyBy(r -> r.route, Types.STRING)
                .transform("assemble traces", TraceAssembler.PARTIAL_TYPE,
                        new TraceAssembler(quietMs, rootWaitMs, followDelayMs, maxHoldMs, slideMs, boundsMs,
                                sourceTopic, job, marks))
                .uid("trace-assembler");
        tEnv.createTemporaryView(partialsView, tEnv.fromDataStream(partials, Schema.newBuilder()
                .columnByMetadata("rowtime", "TIMESTAMP_LTZ(3)")
                .watermark("rowtime", "SOURCE_WATERMARK()")
                .build()));
        // Rejected by the decoder, or not taken by the assembler: one view of the span path's dead letters.
        tEnv.createTemporaryView(deadView, tEnv.fromDataStream(decoded.getSideOutput(TraceAssembler.DEAD_LETTERS)
                .union(partials.getSideOutput(TraceAssembler.DEAD_LETTERS))));
    }

    /** Span records and link probes on to the assembler; what the decoder rejected to the dead letters, with its reason. */
    static final class Split extends ProcessFunction<SpanSource.Record, EncodedSpan> {
        private final String sourceTopic, job;

        Split(String sourceTopic, String job) {
            this.sourceTopic = sourceTopic;
            this.job = job;
        }

        @Override
        public void processElement(SpanSource.Record r, Context ctx, Collector<EncodedSpan> out) {
            if (r.span != null) {
                out.collect(r.span);
            } else {
                ctx.output(TraceAssembler.DEAD_LETTERS, Row.of(sourceTopic, r.partition, r.offset, r.reason, r.payload, job));
            }
        }
    }
}
