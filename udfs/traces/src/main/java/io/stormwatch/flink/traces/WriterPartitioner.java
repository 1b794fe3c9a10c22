package io.stormwatch.flink.traces;

import org.apache.flink.connector.kafka.sink.KafkaPartitioner;
import org.apache.flink.table.data.RowData;

import java.util.Arrays;

/**
 * The Kafka sink partitioner of stormwatch_span_instances ('sink.partitioner'): each sink subtask (one
 * per trace-assembler subtask, chained) writes only into partitions of its own, those whose number is
 * its index modulo the sink's parallelism, so every partition has one writer and holds its records in
 * the order that writer emitted them: a bucket's figures, then the progress mark that closes it
 * ({@link TraceAssembler}). A reader's watermark per partition can then be the latest mark.
 *
 * Figures go to one of the subtask's partitions by their key; marks (rows whose first field, the
 * service, is null) go round the subtask's partitions in turn, so the assembler's `marks` marks per
 * boundary reach each of them. With fewer partitions than subtasks a partition would have several
 * writers: the span path refuses to start then (jobs/spans.py), and this partitioner, used anyway,
 * falls back to sharing (subtask modulo partitions).
 */
public final class WriterPartitioner implements KafkaPartitioner<RowData> {
    private static final long serialVersionUID = 1L;
    private int subtask, subtasks = 1, nextMark;

    @Override
    public void open(int parallelInstanceId, int parallelInstances) {
        this.subtask = parallelInstanceId;
        this.subtasks = Math.max(1, parallelInstances);
    }

    @Override
    public int partition(RowData record, byte[] key, byte[] value, String topic, int[] partitions) {
        return partitions[index(record.isNullAt(0), key, partitions.length)];
    }

    /** The position among `count` partitions of a mark or of figures with this key. */
    int index(boolean mark, byte[] key, int count) {
        if (count < subtasks) return subtask % count;
        int owned = (count - subtask + subtasks - 1) / subtasks; // positions subtask, subtask + subtasks, ...
        int choice;
        if (mark) {
            choice = nextMark;
            nextMark = (nextMark + 1) % owned;
        } else {
            choice = Math.floorMod(Arrays.hashCode(key), owned);
        }
        return subtask + choice * subtasks;
    }

    /** How many marks per boundary reach every partition of every subtask. */
    public static int marksPerBoundary(int partitions, int subtasks) {
        return Math.max(1, -Math.floorDiv(-partitions, Math.max(1, subtasks)));
    }
}
