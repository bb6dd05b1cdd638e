import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka client calls Spark's Kafka connector (spark-sql-kafka-0-10, Spark 4.0) makes, in
 * the same order and with the same configuration, without Spark:
 *
 * <ul>
 *   <li>the sink (KafkaWriteTask): a default KafkaProducer (idempotent, acks=all) with byte-array
 *       serializers, send(ProducerRecord(topic, partition, timestamp, key, value, headers),
 *       callback) and flush() before the task reports success;
 *   <li>the driver (ConsumerStrategy + KafkaOffsetReaderAdmin): Admin.create,
 *       listTopics (subscribePattern), describeTopics(...).allTopicNames(), and
 *       listOffsets(earliest / latest / forTimestamp) with ListOffsetsOptions(isolationLevel);
 *   <li>the executors (InternalKafkaConsumer): a KafkaConsumer with auto.offset.reset=none,
 *       enable.auto.commit=false, group.id "spark-kafka-source-...-executor" that is never joined,
 *       receive.buffer.bytes=65536, assign(one partition), seek, poll, position, and
 *       seekToBeginning/seekToEnd + position for the available range; under both isolation
 *       levels.
 * </ul>
 *
 * It only reports what it saw, one fact per line ("key value"); the Python test asserts.
 * Usage: SparkConnectorCalls BOOTSTRAP TOPIC PARTITIONS RECORDS_PER_PARTITION
 */
public final class SparkConnectorCalls {
    private static void out(String key, Object value) {
        System.out.println(key + " " + value);
        System.out.flush();
    }

    private static Admin admin(String bootstrap) {
        Map<String, Object> p = new HashMap<>();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // KafkaSourceProvider.kafkaParamsForDriver also passes the consumer settings to Admin.create.
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 1);
        p.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, 65536);
        return Admin.create(p);
    }

    private static KafkaConsumer<byte[], byte[]> executorConsumer(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, "spark-kafka-source-" + UUID.randomUUID() + "-executor");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, 65536);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        return new KafkaConsumer<>(p);
    }

    private static Map<TopicPartition, Long> listOffsets(
            Admin admin, Set<TopicPartition> tps, OffsetSpec spec, IsolationLevel level) throws Exception {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (TopicPartition tp : tps) {
            req.put(tp, spec);
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res =
            admin.listOffsets(req, new ListOffsetsOptions(level)).all().get();
        Map<TopicPartition, Long> out = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e : res.entrySet()) {
            out.put(e.getKey(), e.getValue().offset());
        }
        return out;
    }

    /** Offsets an executor consumer sees over [0, until) of partition 0 under `isolation`. */
    private static String offsetsSeen(String bootstrap, TopicPartition tp, long until, String isolation) {
        StringBuilder seen = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> c = executorConsumer(bootstrap, isolation)) {
            c.assign(Collections.singletonList(tp));
            long offset = 0;
            int polls = 0;
            while (offset < until && polls < 50) {
                c.seek(tp, offset);
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(1000));
                polls++;
                for (ConsumerRecord<byte[], byte[]> r : recs.records(tp)) {
                    if (r.offset() >= until) {
                        break;
                    }
                    seen.append(r.offset()).append(',');
                }
                // Like KafkaDataConsumer: when a poll returns only invisible records (aborted data,
                // markers), continue from the consumer's position.
                offset = Math.max(offset, c.position(tp));
            }
        }
        return seen.toString();
    }

    /**
     * read_committed as the connector sees it: listOffsets(latest, READ_COMMITTED) is the last
     * stable offset, and the consumer skips aborted records and transaction markers.
     * Layout of partition 0: aborted txn (0,1,2 + marker 3), committed txn (4,5,6 + marker 7),
     * then an open txn (8,9) while offsets are listed.
     */
    private static void transactions(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(Collections.singleton(new NewTopic(topic, 1, (short) 1))).all().get();
            TopicPartition tp = new TopicPartition(topic, 0);
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "spark-calls-" + UUID.randomUUID());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                producer.initTransactions();
                producer.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, ("aborted-" + i).getBytes()));
                }
                producer.flush();  // without it the client drops the batches and nothing reaches the log
                producer.abortTransaction();
                producer.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, ("committed-" + i).getBytes()));
                }
                producer.commitTransaction();
                Set<TopicPartition> tps = Collections.singleton(tp);
                // The coordinator writes the commit marker after answering EndTxn (as in Kafka), so wait
                // (bounded) until the marker is in: the last stable offset catches up with the high watermark.
                long hw = -1;
                long lso = -2;
                for (int attempt = 0; attempt < 100 && (lso != hw || hw < 8); attempt++) {
                    if (attempt > 0) {
                        Thread.sleep(100);
                    }
                    hw = listOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED).get(tp);
                    lso = listOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED).get(tp);
                }
                out("txn.closed.latest.read_uncommitted", hw);
                out("txn.closed.latest.read_committed", lso);
                out("txn.read.read_uncommitted", offsetsSeen(bootstrap, tp, hw, "read_uncommitted"));
                out("txn.read.read_committed", offsetsSeen(bootstrap, tp, lso, "read_committed"));
                producer.beginTransaction();
                for (int i = 0; i < 2; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, ("open-" + i).getBytes()));
                }
                producer.flush();
                out("txn.open.latest.read_uncommitted",
                    listOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED).get(tp));
                out("txn.open.latest.read_committed",
                    listOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED).get(tp));
                producer.abortTransaction();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int perPartition = Integer.parseInt(args[3]);

        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(Collections.singleton(new NewTopic(topic, partitions, (short) 1))).all().get();
            out("created", topic);

            // --- sink: KafkaWriteTask with the default (idempotent) producer ---
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            long baseTs = System.currentTimeMillis() - 3_600_000L;
            final Exception[] failed = new Exception[1];
            Callback cb = (RecordMetadata md, Exception e) -> {
                if (e != null && failed[0] == null) {
                    failed[0] = e;
                }
            };
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < perPartition; i++) {
                    for (int p = 0; p < partitions; p++) {
                        List<Header> headers = new ArrayList<>();
                        headers.add(new RecordHeader("seq", Integer.toString(i).getBytes()));
                        // Record i of every partition has timestamp baseTs + i*1000: forTimestamp targets.
                        producer.send(new ProducerRecord<>(topic, p, baseTs + i * 1000L,
                            ("k" + p + "-" + i).getBytes(), ("v" + p + "-" + i).getBytes(), headers), cb);
                    }
                }
                producer.flush();
            }
            out("produce.error", failed[0] == null ? "none" : failed[0].toString());
            out("base_ts", baseTs);

            // --- driver: listTopics (subscribePattern) and describeTopics (subscribe) ---
            boolean listed = false;
            for (TopicListing l : admin.listTopics().listings().get()) {
                if (l.name().equals(topic)) {
                    listed = true;
                }
            }
            out("listTopics.contains", listed);
            Map<String, TopicDescription> desc =
                admin.describeTopics(Collections.singleton(topic)).allTopicNames().get();
            TopicDescription d = desc.get(topic);
            Set<TopicPartition> tps = new java.util.HashSet<>();
            for (TopicPartitionInfo info : d.partitions()) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            out("describeTopics.partitions", d.partitions().size());
            out("describeTopics.internal", d.isInternal());

            for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED}) {
                String lv = level.toString().toLowerCase();
                for (Map.Entry<TopicPartition, Long> e : listOffsets(admin, tps, OffsetSpec.earliest(), level).entrySet()) {
                    out("earliest." + lv + "." + e.getKey().partition(), e.getValue());
                }
                for (Map.Entry<TopicPartition, Long> e : listOffsets(admin, tps, OffsetSpec.latest(), level).entrySet()) {
                    out("latest." + lv + "." + e.getKey().partition(), e.getValue());
                }
            }
            // forTimestamp: exact hit, between two records, and past the end (-1 => "latest" in Spark)
            for (Map.Entry<TopicPartition, Long> e : listOffsets(admin, tps, OffsetSpec.forTimestamp(baseTs + 5000L), IsolationLevel.READ_UNCOMMITTED).entrySet()) {
                out("forTimestamp.exact." + e.getKey().partition(), e.getValue());
            }
            for (Map.Entry<TopicPartition, Long> e : listOffsets(admin, tps, OffsetSpec.forTimestamp(baseTs + 5500L), IsolationLevel.READ_UNCOMMITTED).entrySet()) {
                out("forTimestamp.between." + e.getKey().partition(), e.getValue());
            }
            for (Map.Entry<TopicPartition, Long> e : listOffsets(admin, tps, OffsetSpec.forTimestamp(System.currentTimeMillis() + 3_600_000L), IsolationLevel.READ_UNCOMMITTED).entrySet()) {
                out("forTimestamp.future." + e.getKey().partition(), e.getValue());
            }

            // --- executors: one consumer per partition, assign + seek + poll over [from, until) ---
            for (String isolation : new String[] {"read_uncommitted", "read_committed"}) {
                for (TopicPartition tp : tps) {
                    try (KafkaConsumer<byte[], byte[]> c = executorConsumer(bootstrap, isolation)) {
                        c.assign(Collections.singletonList(tp));
                        // getAvailableOffsetRange
                        c.seekToBeginning(Collections.singleton(tp));
                        long earliest = c.position(tp);
                        c.seekToEnd(Collections.singleton(tp));
                        long latest = c.position(tp);
                        out("range." + isolation + "." + tp.partition(), earliest + ".." + latest);
                        long from = 2;
                        long until = latest - 1;
                        long offset = from;
                        StringBuilder seen = new StringBuilder();
                        int polls = 0;
                        while (offset < until && polls < 200) {
                            c.seek(tp, offset);  // the connector seeks before every poll
                            ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(2000));
                            polls++;
                            for (ConsumerRecord<byte[], byte[]> r : recs.records(tp)) {
                                if (r.offset() >= until) {
                                    break;
                                }
                                if (r.offset() != offset) {
                                    out("gap." + isolation + "." + tp.partition(), offset + "->" + r.offset());
                                }
                                String seq = new String(r.headers().lastHeader("seq").value());
                                seen.append(r.offset()).append(':').append(new String(r.key())).append(':')
                                    .append(new String(r.value())).append(':').append(seq).append(':')
                                    .append(r.timestamp() - baseTs).append(',');
                                offset = r.offset() + 1;
                            }
                            out("position." + isolation + "." + tp.partition() + "." + polls, c.position(tp));
                        }
                        out("read." + isolation + "." + tp.partition(), seen.toString());
                        // an offset below the log start must fail with auto.offset.reset=none (data loss path)
                        try {
                            c.seek(tp, latest + 100);
                            c.poll(Duration.ofMillis(2000));
                            out("outOfRange." + isolation + "." + tp.partition(), "no-error position=" + c.position(tp));
                        } catch (org.apache.kafka.clients.consumer.OffsetOutOfRangeException e) {
                            out("outOfRange." + isolation + "." + tp.partition(), "OffsetOutOfRangeException");
                        }
                    }
                }
            }
        }
        transactions(bootstrap, topic + "-txn");
        out("done", "ok");
    }
}
