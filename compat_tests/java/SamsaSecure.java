// The Java client (kafka-clients 3.9.1) over SSL / SASL_PLAINTEXT / SASL_SSL, for
// compat_tests/test_security_clients.py.
//
// Usage: java SamsaSecure PROPERTIES_FILE TOPIC COUNT
//   PROPERTIES_FILE: client properties (bootstrap.servers, security.protocol, sasl.*, ssl.*).
//
// Creates TOPIC with AdminClient, commits COUNT records in one transaction with a transactional
// KafkaProducer, then reads them back in a consumer group (subscribe, read_committed) and
// commits the group's offsets. Reports, one per line:
//   PRODUCED TAB count      CONSUMED TAB count TAB first-value TAB last-value
//   ERROR TAB exception-class TAB message        (and exits 3) on any failure, e.g. authentication
// The Python test owns all checking.

import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class SamsaSecure {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: SamsaSecure PROPERTIES_FILE TOPIC COUNT");
            System.exit(2);
        }
        Properties base = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            base.load(in);
        }
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        try {
            run(base, topic, count);
        } catch (Exception e) {
            Throwable t = e;
            while (t.getCause() != null && !(t instanceof org.apache.kafka.common.KafkaException)) {
                t = t.getCause();
            }
            System.out.println("ERROR\t" + t.getClass().getName() + "\t" + String.valueOf(t.getMessage()).replace('\n', ' '));
            System.out.flush();
            System.exit(3);
        }
    }

    private static void run(Properties base, String topic, int count) throws Exception {
        Properties ap = new Properties();
        ap.putAll(base);
        ap.put("request.timeout.ms", "20000");
        ap.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(Collections.singletonList(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.putAll(base);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "secure-" + topic);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < count; i++) {
                p.send(new ProducerRecord<>(topic, ("v" + i).getBytes(StandardCharsets.UTF_8)));
            }
            p.commitTransaction();
        }
        System.out.println("PRODUCED\t" + count);
        Properties cp = new Properties();
        cp.putAll(base);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, "secure-group-" + topic);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 60000;
            while (values.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    values.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
            c.commitSync();
        }
        System.out.println("CONSUMED\t" + values.size() + "\t" + (values.isEmpty() ? "-" : values.get(0)) + "\t"
                + (values.isEmpty() ? "-" : values.get(values.size() - 1)));
    }
}
