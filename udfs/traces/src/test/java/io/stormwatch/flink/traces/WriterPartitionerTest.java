package io.stormwatch.flink.traces;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Every partition of stormwatch_span_instances has one writer, and every writer's marks reach all of its. */
class WriterPartitionerTest {
    private static WriterPartitioner opened(int subtask, int subtasks) {
        WriterPartitioner p = new WriterPartitioner();
        p.open(subtask, subtasks);
        return p;
    }

    private static byte[] key(int i) {
        return ("{\"service\":\"s" + i + "\",\"instance\":\"i" + i + "\"}").getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void eachPartitionHasOneWriterAndEachBoundaryMarksAllOfAWritersPartitions() {
        for (int subtasks = 1; subtasks <= 4; subtasks++) {
            for (int partitions = subtasks; partitions <= 9; partitions++) {
                Map<Integer, Integer> writerOf = new HashMap<>();
                int marks = WriterPartitioner.marksPerBoundary(partitions, subtasks);
                for (int subtask = 0; subtask < subtasks; subtask++) {
                    WriterPartitioner p = opened(subtask, subtasks);
                    Set<Integer> figures = new HashSet<>();
                    for (int i = 0; i < 200; i++) figures.add(p.index(false, key(i), partitions));
                    for (int boundary = 0; boundary < 3; boundary++) {
                        Set<Integer> marked = new HashSet<>();
                        for (int m = 0; m < marks; m++) marked.add(p.index(true, null, partitions));
                        assertTrue(marked.containsAll(figures), "marks of one boundary reach every partition written");
                        for (int q : marked) {
                            assertEquals(subtask, (int) writerOf.getOrDefault(q, subtask), "one writer per partition");
                            writerOf.put(q, subtask);
                        }
                    }
                    for (int q : figures) assertEquals(subtask, (int) writerOf.get(q));
                }
                assertEquals(partitions, writerOf.size(), "no partition left without a writer (or marks)");
            }
        }
    }

    @Test
    void theSameKeyGoesToTheSamePartition() {
        WriterPartitioner p = opened(1, 2);
        assertEquals(p.index(false, key(7), 6), p.index(false, key(7), 6));
    }

    @Test
    void fewerPartitionsThanWritersShare() {
        assertEquals(0, opened(2, 3).index(false, key(1), 2));
        assertEquals(1, opened(1, 3).index(true, null, 2));
    }

    @Test
    void aMarkIsAnEmptyRowOfKindMark() {
        org.apache.flink.types.Row mark = TraceAssembler.mark(20_000L);
        assertEquals("MARK", mark.getField(0));
        assertEquals(null, mark.getField(1));
        assertEquals(20_000L, mark.getField(5));
        assertEquals(java.util.List.of(0L, 0L), java.util.Arrays.asList((Long[]) mark.getField(6)), "no calls, no errors");
    }
}
