import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * bench/latency.py's producer on the Java client (kafka-clients), which waits on a selector
 * where librdkafka's idempotent producer with linger.ms=0 busy-waits.
 *
 * Sends at a fixed rate, each message stamped with its intended send time (8 bytes, little-endian
 * System.nanoTime(), then padding to the message size), round-robin over the partitions, paced by
 * parking until each message's time: never busy-waiting. Ack latency is taken in the send callback
 * from the intended time, so a broker that falls behind shows up as latency (no coordinated
 * omission).
 *
 * System.nanoTime() is clock_gettime(CLOCK_MONOTONIC) in HotSpot on Linux, the clock of Python's
 * time.monotonic_ns(): the stamps are compared with it in bench/latency.py's consumer process. The
 * bench checks this at every start (the CLOCK line below must fall between two readings of
 * time.monotonic_ns() taken around it); on the 2-core bench machine (OpenJDK 17, Debian 12) a
 * JVM's first nanoTime() fell 28-31 ms after a monotonic_ns() read before starting it and 4 ms
 * before one read after it exited.
 *
 * Usage: LatencyProducer BOOTSTRAP TOPIC ACKS PARTITIONS SIZE RATE WARMUP_S SECONDS OUT_FILE
 *
 * Stdout, one line each, read by bench/latency.py as they come:
 *   CLOCK <nanoTime>                          at start
 *   MEASURE <ns>                              the intended send time from which samples count
 *   MEASURING <nanoTime>                      the first measured message is due (CPU snapshot)
 *   DONE <nanoTime> <sent> <errors> <acked>   every send answered (flush returned)
 *   FIRST_ERROR <exception>                   once, if a send failed
 * OUT_FILE: the ack latencies of the measured messages, one "<microseconds> <count>" line per
 * distinct value (ascending), for an HdrHistogram on the Python side.
 */
public final class LatencyProducer {
    public static void main(String[] args) throws Exception {
        if (args.length != 9) {
            System.err.println("usage: LatencyProducer BOOTSTRAP TOPIC ACKS PARTITIONS SIZE RATE WARMUP_S SECONDS OUT_FILE");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], acks = args[2];
        int partitions = Integer.parseInt(args[3]);
        int size = Integer.parseInt(args[4]);
        long rate = Long.parseLong(args[5]);
        double warmup = Double.parseDouble(args[6]), seconds = Double.parseDouble(args[7]);
        Path out = Path.of(args[8]);
        System.out.println("CLOCK " + System.nanoTime());
        System.out.flush();

        Properties cfg = new Properties();
        cfg.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cfg.put(ProducerConfig.ACKS_CONFIG, acks);
        cfg.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(acks.equals("all")));
        cfg.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        cfg.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        cfg.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        // Callbacks run on the producer's I/O thread; the main thread reads these after flush().
        long interval = 1_000_000_000L / rate;
        long[] latencies = new long[(int) Math.min((long) (seconds * 1e9) / interval + 2, Integer.MAX_VALUE - 16)];
        AtomicLong measured = new AtomicLong();  // latencies[0 .. measured) are filled
        AtomicLong acked = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        Exception[] firstError = new Exception[1];
        long[] measureFrom = {Long.MAX_VALUE};

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(cfg)) {
            // a first message, so that connections and metadata exist before the clock starts
            producer.partitionsFor(topic);
            producer.send(new ProducerRecord<>(topic, 0, null, new byte[Math.max(size, 8)])).get(30, TimeUnit.SECONDS);

            byte[] pad = new byte[Math.max(size - 8, 0)];
            new Random().nextBytes(pad);
            long start = System.nanoTime();
            long from = start + (long) (warmup * 1e9);
            long end = from + (long) (seconds * 1e9);
            measureFrom[0] = from;
            System.out.println("MEASURE " + from);
            System.out.flush();
            boolean measuring = false;
            long i = 0;
            while (true) {
                long due = start + i * interval;
                if (due >= end) break;
                if (!measuring && due >= from) {
                    measuring = true;
                    System.out.println("MEASURING " + System.nanoTime());
                    System.out.flush();
                }
                for (long now = System.nanoTime(); due > now; now = System.nanoTime()) {
                    LockSupport.parkNanos(due - now);  // may return early: park again until due
                }
                byte[] value = new byte[8 + pad.length];
                ByteBuffer.wrap(value).order(ByteOrder.LITTLE_ENDIAN).putLong(due).put(pad);
                final long sent = due;
                producer.send(new ProducerRecord<>(topic, (int) (i % partitions), null, value), (md, e) -> {
                    long t = System.nanoTime();
                    if (e != null) {
                        if (errors.getAndIncrement() == 0) firstError[0] = e;
                        return;
                    }
                    if (sent >= measureFrom[0]) {
                        long n = measured.getAndIncrement();
                        if (n < latencies.length) latencies[(int) n] = Math.max(1, (t - sent) / 1000);
                        acked.incrementAndGet();
                    }
                });
                i++;
            }
            producer.flush();
            System.out.println("DONE " + System.nanoTime() + " " + i + " " + errors.get() + " " + acked.get());
            if (firstError[0] != null) System.out.println("FIRST_ERROR " + firstError[0]);
            System.out.flush();
        }
        long[] sorted = Arrays.copyOf(latencies, (int) Math.min(measured.get(), latencies.length));
        Arrays.sort(sorted);
        try (BufferedWriter w = Files.newBufferedWriter(out)) {
            for (int j = 0; j < sorted.length; ) {
                int k = j;
                while (k < sorted.length && sorted[k] == sorted[j]) k++;
                w.write(sorted[j] + " " + (k - j) + "\n");
                j = k;
            }
        }
    }
}
