// The Java client (kafka-clients 3.9.1) seeking and looking up offsets by time, for
// compat_tests/test_java_client.py.
//
// Usage: java SamsaSeek BOOTSTRAP TOPIC OFFSETS TIMESTAMPS OUTPUT
//   OFFSETS, TIMESTAMPS: comma-separated longs; partition 0 of TOPIC is used.
//
// For each offset: seek(tp, offset), poll until a record arrives (max.poll.records=1), report it.
// For each timestamp: offsetsForTimes({tp: timestamp}), report the answer ("-" for none).
// OUTPUT lines: SEEK TAB target TAB offset TAB value-as-UTF-8
//               TIME TAB timestamp TAB offset TAB record-timestamp   (or TIME TAB timestamp TAB -)
// The Python test owns all checking; this program only reports what it saw.

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class SamsaSeek {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: SamsaSeek BOOTSTRAP TOPIC OFFSETS TIMESTAMPS OUTPUT");
            System.exit(2);
        }
        TopicPartition tp = new TopicPartition(args[1], 0);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "1");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[4]), StandardCharsets.UTF_8));
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(Collections.singletonList(tp));
            for (String s : args[2].split(",")) {
                long target = Long.parseLong(s);
                consumer.seek(tp, target);
                long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos(); // hang guard only
                ConsumerRecord<byte[], byte[]> first = null;
                while (first == null && System.nanoTime() < deadline) {
                    List<ConsumerRecord<byte[], byte[]>> records = consumer.poll(Duration.ofMillis(500)).records(tp);
                    Iterator<ConsumerRecord<byte[], byte[]>> it = records.iterator();
                    if (it.hasNext()) {
                        first = it.next();
                    }
                }
                if (first == null) {
                    out.println("SEEK\t" + target + "\t-\t-");
                } else {
                    out.println("SEEK\t" + target + "\t" + first.offset() + "\t"
                            + new String(first.value(), StandardCharsets.UTF_8));
                }
            }
            for (String s : args[3].split(",")) {
                long t = Long.parseLong(s);
                Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(Collections.singletonMap(tp, t));
                OffsetAndTimestamp o = found.get(tp);
                out.println("TIME\t" + t + "\t" + (o == null ? "-" : o.offset() + "\t" + o.timestamp()));
            }
        }
    }
}
