// The Java client (kafka-clients 3.9.1) driven through one round trip, for compat_tests/test_java_client.py.
//
// Usage: java SamsaCompat BOOTSTRAP TOPIC PARTITIONS CODEC INPUT OUTPUT
//
// 1. AdminClient.createTopics(TOPIC, PARTITIONS, rf=1).
// 2. KafkaProducer with the client's defaults (idempotence on, acks=all) plus
//    compression.type=CODEC sends every record in INPUT, in order.
// 3. AdminClient.listOffsets(earliest, latest) for every partition.
// 4. KafkaConsumer without a group: assign(all partitions), seek(tp, 0),
//    poll until as many records as were sent have arrived (or 120 s pass).
//
// INPUT lines:  seq TAB key TAB value TAB headers
// OUTPUT lines: ACK TAB seq TAB partition TAB offset
//               EARLIEST|LATEST TAB partition TAB offset
//               REC TAB partition TAB offset TAB key TAB value TAB headers
// where key/value are lower-case hex or "-" for null, and headers are
// comma-separated name=hex (or name=- for a null value), "" for none.
// The Python test owns all checking; this program only reports what it saw.

import java.io.BufferedReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class SamsaCompat {
    private static final HexFormat HEX = HexFormat.of();

    private static byte[] decode(String field) {
        return field.equals("-") ? null : HEX.parseHex(field);
    }

    private static String encode(byte[] bytes) {
        return bytes == null ? "-" : HEX.formatHex(bytes);
    }

    private static List<Header> decodeHeaders(String field) {
        List<Header> headers = new ArrayList<>();
        if (field.isEmpty()) {
            return headers;
        }
        for (String item : field.split(",")) {
            int eq = item.indexOf('=');
            headers.add(new RecordHeader(item.substring(0, eq), decode(item.substring(eq + 1))));
        }
        return headers;
    }

    private static String encodeHeaders(Iterable<Header> headers) {
        StringBuilder sb = new StringBuilder();
        for (Header h : headers) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(h.key()).append('=').append(encode(h.value()));
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: SamsaCompat BOOTSTRAP TOPIC PARTITIONS CODEC INPUT OUTPUT");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        String codec = args[3];

        List<String[]> input = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(Paths.get(args[4]), StandardCharsets.UTF_8)) {
            String line;
            while ((line = r.readLine()) != null) {
                input.add(line.split("\t", -1));
            }
        }

        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[5]), StandardCharsets.UTF_8))) {
            Properties adminProps = new Properties();
            adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(adminProps)) {
                admin.createTopics(Collections.singletonList(new NewTopic(topic, partitions, (short) 1))).all().get();

                Properties producerProps = new Properties();
                producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                producerProps.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
                    for (String[] f : input) {
                        futures.add(producer.send(new ProducerRecord<>(topic, null, null, decode(f[1]), decode(f[2]),
                                decodeHeaders(f[3]))));
                    }
                    producer.flush();
                    for (int i = 0; i < futures.size(); i++) {
                        RecordMetadata md = futures.get(i).get();
                        out.println("ACK\t" + input.get(i)[0] + "\t" + md.partition() + "\t" + md.offset());
                    }
                }

                Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                for (int p = 0; p < partitions; p++) {
                    earliest.put(new TopicPartition(topic, p), OffsetSpec.earliest());
                    latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
                }
                for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                        : admin.listOffsets(earliest).all().get().entrySet()) {
                    out.println("EARLIEST\t" + e.getKey().partition() + "\t" + e.getValue().offset());
                }
                for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                        : admin.listOffsets(latest).all().get().entrySet()) {
                    out.println("LATEST\t" + e.getKey().partition() + "\t" + e.getValue().offset());
                }
            }

            Properties consumerProps = new Properties();
            consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    tps.add(new TopicPartition(topic, p));
                }
                consumer.assign(tps);
                for (TopicPartition tp : tps) {
                    consumer.seek(tp, 0L);
                }
                int received = 0;
                long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos(); // hang guard only
                while (received < input.size() && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(500))) {
                        out.println("REC\t" + rec.partition() + "\t" + rec.offset() + "\t" + encode(rec.key()) + "\t"
                                + encode(rec.value()) + "\t" + encodeHeaders(rec.headers()));
                        received++;
                    }
                }
            }
        }
    }
}
