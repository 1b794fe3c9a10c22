package io.stormwatch.flink.otlp;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.BufferedInputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The otlp format's decoder alone, on one thread: spans per second for messages of one encoding.
 * Not a test (surefire skips it); bench/otlp_decoder.py writes the messages and runs it:
 *
 *   java -cp ... io.stormwatch.flink.otlp.DecoderBench otlp_json|otlp_proto MESSAGES_FILE [SECONDS]
 *
 * MESSAGES_FILE: each message as a 4-byte big-endian length, then its bytes. Warms up for SECONDS,
 * then decodes the messages round after round for SECONDS more and prints spans/s and MB/s.
 */
public final class DecoderBench {
    public static void main(String[] args) throws IOException {
        // otlp_proto_classes: the generated classes' parseFrom and getters (ProtoReferenceTest), for comparison.
        boolean classes = args[0].equals("otlp_proto_classes");
        OtlpDecoder.Encoding encoding = OtlpFormatFactory.encoding(classes ? "otlp_proto" : args[0]);
        List<byte[]> messages = read(args[1]);
        double seconds = args.length > 2 ? Double.parseDouble(args[2]) : 10;
        long bytes = 0;
        for (byte[] m : messages) bytes += m.length;
        OtlpDecoder decoder = new OtlpDecoder(encoding, 3600, 65536, () -> System.currentTimeMillis() / 1000);
        long[] sink = new long[1];  // keeps the rows alive enough that the JIT cannot drop the work
        if (classes) {
            runClasses(messages, seconds, sink);  // warm-up
            long start = System.nanoTime();
            long[] counted = runClasses(messages, seconds, sink);
            double elapsed = (System.nanoTime() - start) / 1e9;
            System.out.printf(Locale.ROOT, "%s: %d messages, %d rounds in %.1f s: %,.0f rows/s, %.1f MB/s%n", args[0],
                    messages.size(), counted[0], elapsed, counted[1] / elapsed, counted[0] * bytes / 1e6 / elapsed);
            return;
        }
        run(decoder, messages, seconds, sink);  // warm-up
        long spansBefore = decoder.spans, rejectedBefore = decoder.rejectedSpans + decoder.rejectedMessages;
        long start = System.nanoTime();
        long rounds = run(decoder, messages, seconds, sink);
        double elapsed = (System.nanoTime() - start) / 1e9;
        long spans = decoder.spans - spansBefore;
        System.out.printf(Locale.ROOT, "%s: %d messages (%.1f MB), %d spans a round; %d rounds in %.1f s: "
                        + "%,.0f spans/s, %.1f MB/s, %d rejected (rows %d)%n",
                args[0], messages.size(), bytes / 1e6, spans / rounds, rounds, elapsed, spans / elapsed,
                rounds * bytes / 1e6 / elapsed, decoder.rejectedSpans + decoder.rejectedMessages - rejectedBefore, sink[0] % 1000);
    }

    private static long run(OtlpDecoder decoder, List<byte[]> messages, double seconds, long[] sink) {
        long end = System.nanoTime() + (long) (seconds * 1e9), rounds = 0;
        while (System.nanoTime() < end) {
            for (byte[] m : messages) decoder.decode(m, row -> sink[0] += row.getArity());
            rounds++;
        }
        return rounds;
    }

    private static long[] runClasses(List<byte[]> messages, double seconds, long[] sink) {
        long end = System.nanoTime() + (long) (seconds * 1e9), rounds = 0, rows = 0;
        while (System.nanoTime() < end) {
            for (byte[] m : messages) {
                for (org.apache.flink.table.data.GenericRowData row : ProtoReferenceTest.reference(m)) {
                    sink[0] += row.getArity();
                    rows++;
                }
            }
            rounds++;
        }
        return new long[] {rounds, rows};
    }

    private static List<byte[]> read(String file) throws IOException {
        List<byte[]> out = new ArrayList<>();
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(file)))) {
            while (true) {
                int n;
                try {
                    n = in.readInt();
                } catch (EOFException e) {
                    return out;
                }
                byte[] m = new byte[n];
                in.readFully(m);
                out.add(m);
            }
        }
    }
}
