package io.stormwatch.flink.traces;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.metrics.Counter;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.OutputTag;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Assembles each trace once: its spans (and the link probes naming them) are kept in keyed state,
 * per trace id, until the trace is done: its root span has come and it has been quiet for `quiet` of
 * event time since its latest span end. A trace whose root has not come waits `rootWait` after its
 * latest span end instead (a long call's parent ends after a pause longer than the quiet time; a root
 * that never comes, unsampled or lost, is given up then); a trace with PRODUCER spans waits
 * `followDelay` after the last of them, for the consumers linking to them; none is held longer than
 * `maxHold` after its first span's end. Then {@link TraceFacts} derives every per-trace fact in one
 * pass into the per-bucket {@link Partials}, and the state is cleared.
 *
 * Event time: no span is ever paired through a time bound. Every fact of a trace is placed at the
 * trace's end, or, for a trace done later than its end's quiet time, at the moment it was done less
 * the quiet time ({@link TraceFacts}): a trace done at input watermark W is placed after W' - quiet,
 * W' the watermark before W. So the output watermark is the input's less the quiet time, however long
 * a trace runs or waits: a window closes `quiet` after the input watermark passes its end. It is passed
 * on only when it reaches the last millisecond before a slide boundary (where windows end).
 * A bucket's partials are emitted (timestamped with the bucket's start) before the watermark passes
 * the bucket's end. A span at or behind that output watermark that would start a trace is late, and a
 * span of a trace that was already assembled came too late to join it: both go to the dead letters with
 * the reason, counted.
 *
 * An assembled trace's refusal lasts `maxHold` of event time. It is a keyed value (its end) and an entry
 * in a wheel of one-second buckets that clears it once the watermark passes, not a timer: a timer per
 * assembled trace kept a timer queue of every trace of the last minute (at 10k traces/s 600k timers,
 * and the queue's upkeep a tenth of the job's time, bench/README.md). The wheel is not checkpointed; on
 * a restore it is rebuilt from the keyed values, which follow their keys when the job is rescaled.
 *
 * Progress marks: each time the output watermark reaches a slide boundary T, `marks` rows of kind MARK
 * (bucket_start_ms T) follow the bucket's partials: "this subtask has emitted everything before T". The
 * span path writes its INSTANCE partials and these marks straight to stormwatch_span_instances, each
 * subtask into partitions of its own ({@link WriterPartitioner}), so a reader's watermark per partition
 * can be the latest mark, with no allowance for other writers, and a health window closes the moment the
 * span path's buckets do. After a restore the subtask takes the output watermark of the slowest
 * subtask, so it may accept a trace before a mark already written: an INSTANCE partial of a bucket
 * ending before the highest such mark is placed in the bucket starting there (counted), never behind it.
 */
public class TraceAssembler extends AbstractStreamOperator<Row>
        implements OneInputStreamOperator<EncodedSpan, Row>, Triggerable<String, VoidNamespace> {
    public static final String[] PARTIAL_FIELDS = {
        "kind", "k1", "k2", "k3", "flag", "bucket_start_ms", "n", "d", "h1", "h2", "b", "ex1", "ex2"};
    public static final TypeInformation<Row> PARTIAL_TYPE = Types.ROW_NAMED(PARTIAL_FIELDS,
            Types.STRING, Types.STRING, Types.STRING, Types.STRING, Types.BOOLEAN, Types.LONG,
            Types.OBJECT_ARRAY(Types.LONG), Types.OBJECT_ARRAY(Types.DOUBLE), Types.OBJECT_ARRAY(Types.LONG),
            Types.OBJECT_ARRAY(Types.LONG), Types.OBJECT_ARRAY(Types.LONG), Types.STRING, Types.STRING);
    public static final TypeInformation<Row> DEAD_LETTER_TYPE = Types.ROW_NAMED(
            new String[] {"source_topic", "source_partition", "source_offset", "reason", "payload", "job"},
            Types.STRING, Types.INT, Types.LONG, Types.STRING, Types.STRING, Types.STRING);
    public static final OutputTag<Row> DEAD_LETTERS = new OutputTag<>("dead-letters", DEAD_LETTER_TYPE);

    private final long quietMs, rootWaitMs, followDelayMs, maxHoldMs, slideMs;
    private final double[] boundsMs;
    private final String sourceTopic, job;

    /** The trace's spans and probes, each as {@link SpanRecord#encode()}'s bytes. */
    private transient ListState<byte[]> spans;
    /** [earliest end, latest end, timer, latest PRODUCER end or Long.MIN_VALUE, 1 once the root came], in ms. */
    private transient ValueState<long[]> meta;
    /** Set once the trace is assembled: until when later spans of it are refused. */
    private transient ValueState<Long> assembled;
    /** Trace ids whose refusal ends in each second (the bucket's end, ms): cleared as the watermark passes. */
    private transient TreeMap<Long, List<String>> refusals;
    private transient boolean restored;
    private transient InternalTimerService<VoidNamespace> timers;
    private transient Partials partials;
    private transient ListState<byte[]> partialsState;
    private transient ListState<Long> watermarkState;
    private transient long lastOut;
    /** The last watermark passed on: lastOut rounded down to just before a slide boundary. */
    private transient long lastEmitted;
    /** After a restore, the highest progress mark any subtask may have written; else Long.MIN_VALUE. */
    private transient long markedUpTo;
    private transient Counter traces, lateSpans, afterAssembly, lostProbes, shiftedInstanceFigures;
    private final int marks;

    /** `marks`: how many MARK rows per slide boundary (one for each partition a writer owns, at most). */
    public TraceAssembler(long quietMs, long rootWaitMs, long followDelayMs, long maxHoldMs, long slideMs,
                          double[] boundsMs, String sourceTopic, String job, int marks) {
        this.marks = Math.max(1, marks);
        this.quietMs = quietMs;
        this.rootWaitMs = Math.max(rootWaitMs, quietMs);
        this.followDelayMs = followDelayMs;
        this.maxHoldMs = maxHoldMs;
        this.slideMs = slideMs;
        this.boundsMs = boundsMs;
        this.sourceTopic = sourceTopic;
        this.job = job;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        partials = new Partials(slideMs, boundsMs);
        lastOut = Long.MIN_VALUE;
        lastEmitted = Long.MIN_VALUE;
        markedUpTo = Long.MIN_VALUE;
        restored = context.isRestored();
        partialsState = context.getOperatorStateStore().getListState(
                new ListStateDescriptor<>("window-partials", byte[].class));
        // Union: after a restore each subtask starts from the lowest output watermark of all, so it
        // accepts every span some downstream window may still take (partials merge, so a bucket may
        // be emitted twice).
        watermarkState = context.getOperatorStateStore().getUnionListState(
                new ListStateDescriptor<>("output-watermark", Types.LONG));
        if (context.isRestored()) {
            for (byte[] bytes : partialsState.get()) {
                partials.restore(new DataInputStream(new ByteArrayInputStream(bytes)));
            }
            long lowest = Long.MAX_VALUE, highest = Long.MIN_VALUE;
            for (Long w : watermarkState.get()) {
                lowest = Math.min(lowest, w);
                highest = Math.max(highest, w);
            }
            lastOut = lowest == Long.MAX_VALUE ? Long.MIN_VALUE : lowest;
            if (highest != Long.MIN_VALUE && highest != Long.MAX_VALUE) {
                markedUpTo = Math.floorDiv(highest + 1, slideMs) * slideMs;
            }
        }
    }

    @Override
    public void open() throws Exception {
        super.open();
        spans = getRuntimeContext().getListState(new ListStateDescriptor<>("span-bytes",
                PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
        ValueStateDescriptor<long[]> metaDescriptor = new ValueStateDescriptor<>("trace", long[].class);
        meta = getRuntimeContext().getState(metaDescriptor);
        assembled = getRuntimeContext().getState(new ValueStateDescriptor<>("assembled", Types.LONG));
        timers = getInternalTimerService("trace-quiet", VoidNamespaceSerializer.INSTANCE, this);
        refusals = new TreeMap<>();
        if (restored) {
            // The wheel from the refusals this subtask's keys hold (after a rescale, other keys than before).
            KeyedStateBackend<String> backend = getKeyedStateBackend();
            List<String> keys;
            try (Stream<String> all = backend.getKeys("assembled", VoidNamespace.INSTANCE)) {
                keys = all.collect(Collectors.toList());
            }
            for (String key : keys) {
                setCurrentKey(key);
                Long until = assembled.value();
                if (until != null) refuseUntil(key, until);
            }
        }
        traces = getMetricGroup().counter("tracesAssembled");
        lateSpans = getMetricGroup().counter("lateSpans");
        afterAssembly = getMetricGroup().counter("spansAfterAssembly");
        lostProbes = getMetricGroup().counter("linksAfterAssembly");
        shiftedInstanceFigures = getMetricGroup().counter("instanceFiguresShifted");
    }

    @Override
    public void processElement(StreamRecord<EncodedSpan> element) throws Exception {
        EncodedSpan encoded = element.getValue();
        long endMs = encoded.endMs;
        boolean probe = encoded.probe;
        long[] m = meta(meta.value());
        // A span behind the output watermark may still join a trace being assembled (its facts go to the
        // trace's end, after the watermark); it cannot start one.
        if (m == null && (endMs <= lastOut || refused())) {
            if (probe) {
                lostProbes.inc();
            } else if (endMs <= lastOut) {
                lateSpans.inc();
                dead(SpanRecord.decode(encoded.bytes), "late span: ended " + (lastOut - endMs) / 1000
                        + " s before the watermark, beyond the allowed out-of-orderness");
            } else {
                afterAssembly.inc();
                dead(SpanRecord.decode(encoded.bytes), "span of a trace already assembled: it came after the trace had been quiet for "
                        + quietMs / 1000.0 + " s since its root (trace_quiet_seconds) or " + rootWaitMs / 1000.0
                        + " s without one (trace_root_wait_seconds); raise them if traces pause that long");
            }
            return;
        }
        if (m == null) {
            m = new long[] {endMs, endMs, Long.MIN_VALUE, Long.MIN_VALUE, 0};
        }
        m[0] = Math.min(m[0], endMs);
        m[1] = Math.max(m[1], endMs);
        if (encoded.producer) m[3] = Math.max(m[3], endMs);
        if (encoded.root) m[4] = 1;
        spans.add(encoded.bytes);
        long fireAt = fireAt(m);
        // Timers are moved lazily: a later span usually pushes the trace's quiet time out, and the
        // timer already set then fires early and is set again (onEventTime), instead of a delete and
        // an insert in the timer queue per span. Only an earlier time needs the timer moved now.
        if (m[2] == Long.MIN_VALUE || fireAt < m[2]) {
            if (m[2] != Long.MIN_VALUE) timers.deleteEventTimeTimer(VoidNamespace.INSTANCE, m[2]);
            // Not at or behind the watermark (a root that came after the trace's quiet time, a late span):
            // the timer's time is when the trace is done, and its facts are placed no earlier than that
            // less the quiet time, which must be after the output watermark.
            long watermark = timers.currentWatermark();
            if (watermark != Long.MAX_VALUE) fireAt = Math.max(fireAt, watermark + 1);
            timers.registerEventTimeTimer(VoidNamespace.INSTANCE, fireAt);
            m[2] = fireAt;
        }
        meta.update(m);
    }

    /** Whether the current trace was assembled and its later spans are still refused. */
    private boolean refused() throws Exception {
        Long until = assembled.value();
        if (until == null) return false;
        if (until > timers.currentWatermark()) return true;
        assembled.clear(); // ended, its wheel bucket not reached yet
        return false;
    }

    private void refuseUntil(String key, long until) {
        long bucket = Math.floorDiv(until, 1000L) * 1000L + 999L; // the last ms of until's second
        refusals.computeIfAbsent(bucket, b -> new ArrayList<>()).add(key);
    }

    /** Clears the refusals that end at or before the watermark. */
    private void endRefusals(long watermark) throws Exception {
        while (!refusals.isEmpty() && refusals.firstKey() <= watermark) {
            for (String key : refusals.pollFirstEntry().getValue()) {
                setCurrentKey(key);
                Long until = assembled.value();
                // Not one assembled again since (a trace id seen after its refusal ended): its own entry clears it.
                if (until != null && until <= watermark) assembled.clear();
            }
        }
    }

    /** A trace's meta as this version keeps it (one saved before the root flag: taken as rooted). */
    private static long[] meta(long[] m) {
        if (m == null || m.length >= 5) return m;
        long[] n = java.util.Arrays.copyOf(m, 5);
        n[4] = 1;
        return n;
    }

    /** When the trace is done: quiet since its last span (rootWait while its root has not come), after the
     * follow delay of its last PRODUCER, at most maxHold after its first span. */
    private long fireAt(long[] m) {
        long fireAt = m[1] + (m[4] != 0 ? quietMs : rootWaitMs);
        if (m[3] != Long.MIN_VALUE) fireAt = Math.max(fireAt, m[3] + followDelayMs);
        return Math.min(fireAt, m[0] + maxHoldMs);
    }

    @Override
    public void onEventTime(InternalTimer<String, VoidNamespace> timer) throws Exception {
        long[] m = meta(meta.value());
        if (m == null) {
            // The end of an assembled trace's refusal period, from a savepoint of the version that kept
            // one timer per refusal.
            Long until = assembled.value();
            if (until != null && until == timer.getTimestamp()) assembled.clear();
            return;
        }
        long due = fireAt(m);
        if (due > timer.getTimestamp()) {
            // Spans came since the timer was set: not quiet yet.
            timers.registerEventTimeTimer(VoidNamespace.INSTANCE, due);
            m[2] = due;
            meta.update(m);
            return;
        }
        List<SpanRecord> records = new ArrayList<>();
        for (byte[] r : spans.get()) records.add(SpanRecord.decode(r));
        // Done at this timer's time T: the watermark before this one was under T, so the output watermark
        // is under T - quiet, and the facts go no earlier (TraceFacts places them at the trace's end if later).
        TraceFacts.derive(records, partials, timer.getTimestamp() - quietMs);
        traces.inc();
        spans.clear();
        meta.clear();
        long until = timer.getTimestamp() + maxHoldMs;
        assembled.update(until);
        refuseUntil(timer.getKey(), until);
    }

    @Override
    public void onProcessingTime(InternalTimer<String, VoidNamespace> timer) {}

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        if (timeServiceManager != null) {
            timeServiceManager.advanceWatermark(mark); // assembles every trace quiet by now
        }
        endRefusals(mark.getTimestamp());
        long in = mark.getTimestamp();
        long out = in == Long.MAX_VALUE ? in : in < Long.MIN_VALUE + quietMs ? Long.MIN_VALUE : in - quietMs;
        if (out > lastOut) {
            for (Partials.Partial p : partials.closeUpTo(out)) {
                long at = p.bucketStartMs;
                if (p.kind == Partials.Kind.INSTANCE && at + slideMs <= markedUpTo) {
                    at = markedUpTo;
                    shiftedInstanceFigures.inc();
                }
                output.collect(new StreamRecord<>(row(p, at), at));
            }
            lastOut = out;
            // Downstream, windows end on slide boundaries: a watermark between two of them closes
            // nothing, yet makes every window aggregate flush (and reset) its buffers. Only the last
            // millisecond before a boundary is passed on, as soon as it is reached: no window closes later.
            long visible = out == Long.MAX_VALUE ? out : Math.floorDiv(out + 1, slideMs) * slideMs - 1;
            if (visible > lastEmitted) {
                lastEmitted = visible;
                if (visible != Long.MAX_VALUE) {
                    Row progress = mark(visible + 1);
                    for (int i = 0; i < marks; i++) output.collect(new StreamRecord<>(progress, visible + 1));
                }
                output.emitWatermark(new Watermark(visible));
            }
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            partials.write(out);
        }
        partialsState.update(List.of(bytes.toByteArray()));
        watermarkState.update(List.of(lastOut));
    }

    /** A progress mark: every partial before `upToMs` has been emitted. No calls, no errors (n). */
    static Row mark(long upToMs) {
        return Row.of("MARK", null, null, null, false, upToMs, new Long[] {0L, 0L}, new Double[0], new Long[0],
                new Long[0], new Long[0], null, null);
    }

    private static Row row(Partials.Partial p, long bucketStartMs) {
        Long[] n = new Long[p.n.length];
        for (int i = 0; i < n.length; i++) n[i] = p.n[i];
        Double[] d = new Double[p.d.length];
        for (int i = 0; i < d.length; i++) d[i] = p.d[i];
        Long[] b = new Long[p.b.length];
        for (int i = 0; i < b.length; i++) b[i] = p.b[i];
        return Row.of(p.kind.name(), p.k1, p.k2, p.k3, p.flag, bucketStartMs, n, d, p.h1.toPairs(),
                p.h2.toPairs(), b, p.ex1, p.ex2);
    }

    private void dead(SpanRecord s, String reason) {
        String payload = "{\"traceId\":" + quote(s.traceId) + ",\"spanId\":" + quote(s.spanId)
                + ",\"serviceName\":" + quote(s.service) + ",\"name\":" + quote(s.name)
                + ",\"endTimeUnixNano\":" + s.end + "}";
        output.collect(DEAD_LETTERS, new StreamRecord<>(
                Row.of(sourceTopic, s.kafkaPartition, s.kafkaOffset, reason, payload, job)));
    }

    static String quote(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c)); else b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
