// The Java producer (kafka-clients 3.9.1) writing through broker failures, for tests/cluster/test_failover.py.
//
// Usage: java ClusterProducer BOOTSTRAP TOPIC PREFIX STOPFILE OUTPUT
//
// Sends PREFIX-0, PREFIX-1, ... with the client's defaults (idempotence on, acks=all,
// unbounded retries within delivery.timeout.ms) until STOPFILE exists, then flushes and exits.
// OUTPUT lines: ACK TAB value TAB partition TAB offset TAB ms  (one per acknowledged record)
//               ERR TAB value TAB exception TAB ms             (one per failed record)
// where ms is the time from send() to the callback.
// The Python test owns all checking.

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ClusterProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], prefix = args[2];
        java.nio.file.Path stop = Paths.get(args[3]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120000);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[4]), StandardCharsets.UTF_8));
             KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            long i = 0;
            while (!Files.exists(stop)) {
                final String value = prefix + "-" + i;
                byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
                final long sent = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, bytes, bytes), (md, e) -> {
                    long ms = (System.nanoTime() - sent) / 1_000_000;
                    synchronized (out) {
                        if (e == null) {
                            out.println("ACK\t" + value + "\t" + md.partition() + "\t" + md.offset() + "\t" + ms);
                        } else {
                            out.println("ERR\t" + value + "\t" + e + "\t" + ms);
                        }
                    }
                });
                i++;
                if (i % 100 == 0) {
                    Thread.sleep(20);
                }
            }
            producer.flush();
        }
    }
}
