"""DescribeTopicPartitions (KIP-966) with the Java AdminClient (kafka-clients 3.9.1).

``Admin.describeTopics`` uses DescribeTopicPartitions when the broker serves it, following
``NextCursor`` page by page; ``partitionSizeLimitPerResponse`` sets the page size. The program
describes two topics (5 and 3 partitions) with pages of 2 partitions and with the default size,
and prints what it got; the broker's request log shows how many requests it took.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.java import compile_java, run_java

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

SOURCE = r"""
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.*;

public class DescribeTopicPartitionsCompat {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("client.id", "dtp-java");
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic("dtp-a", 5, (short) 1), new NewTopic("dtp-b", 3, (short) 1))).all().get();
            for (int limit : new int[] {2, 2000}) {
                Map<String, TopicDescription> d = admin.describeTopics(List.of("dtp-b", "dtp-a"),
                    new DescribeTopicsOptions().partitionSizeLimitPerResponse(limit).includeAuthorizedOperations(true))
                    .allTopicNames().get();
                for (String name : new TreeSet<>(d.keySet())) {
                    TopicDescription t = d.get(name);
                    StringBuilder sb = new StringBuilder("topic " + limit + " " + name + " " + t.topicId() + " " + t.isInternal());
                    for (TopicPartitionInfo pi : t.partitions())
                        sb.append(" ").append(pi.partition()).append(":").append(pi.leader().id()).append(":")
                          .append(pi.replicas().size()).append(":").append(pi.isr().size());
                    sb.append(" ops=").append(t.authorizedOperations() == null ? "null"
                        : String.join(",", new TreeSet<>(t.authorizedOperations().stream().map(Object::toString).toList())));
                    System.out.println(sb);
                }
            }
            try {
                admin.describeTopics(List.of("dtp-missing")).allTopicNames().get();
                System.out.println("missing ok");
            } catch (Exception e) {
                System.out.println("missing " + e.getCause().getClass().getSimpleName());
            }
        }
    }
}
"""


@pytest.fixture(scope="module")
def dtp_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    out: Path = tmp_path_factory.mktemp("dtp-java")
    return compile_java(SOURCE, "DescribeTopicPartitionsCompat", out)


def test_java_admin_describes_topics_page_by_page(broker_factory: Any, dtp_classpath: str) -> None:
    broker = broker_factory({"log.level": "DEBUG"})
    lines = run_java(dtp_classpath, "DescribeTopicPartitionsCompat", broker.bootstrap)
    topics = [ln.split() for ln in lines if ln.startswith("topic ")]
    assert [(t[1], t[2], t[5:-1]) for t in topics] == [
        (limit, name, [f"{p}:0:1:1" for p in range(n)])
        for limit in ("2", "2000") for name, n in (("dtp-a", 5), ("dtp-b", 3))], lines
    ids = {t[2]: t[3] for t in topics}
    assert len(set(ids.values())) == 2 and all(t[3] == ids[t[2]] and t[4] == "false" for t in topics)
    assert all(t[-1] == "ops=ALTER,ALTER_CONFIGS,CREATE,DELETE,DESCRIBE,DESCRIBE_CONFIGS,READ,WRITE" for t in topics), topics
    assert "missing UnknownTopicOrPartitionException" in lines
    requests = re.findall(r"DESCRIBE_TOPIC_PARTITIONS v0 corr=\d+ client='dtp-java'", broker.log_text())
    # 8 partitions in pages of 2: 4 requests; then one at the default size; then the missing topic
    assert len(requests) == 4 + 1 + 1, requests
