"""The Java AdminClient (kafka-clients 3.9.1) manages ACLs and client quotas on Samsa.

createAcls / describeAcls (with ANY, MATCH and PREFIXED filters) / deleteAcls, and
alterClientQuotas / describeClientQuotas (user, client-id and ip entities), at the newest
versions the Java client speaks; what Java wrote is read back with the ``samsa`` tools.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

import pytest

from tests.support import jars

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

SOURCE = r"""
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.quota.*;

public class SecurityAdmin {
    static void out(String s) { System.out.println(s); System.out.flush(); }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(p)) {
            AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "jtopic", PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding pre = new AclBinding(new ResourcePattern(ResourceType.GROUP, "jgroup-", PatternType.PREFIXED),
                new AccessControlEntry("User:alice", "10.1.2.3", AclOperation.DESCRIBE, AclPermissionType.DENY));
            AclBinding txn = new AclBinding(new ResourcePattern(ResourceType.TRANSACTIONAL_ID, "jtx", PatternType.LITERAL),
                new AccessControlEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW));
            admin.createAcls(List.of(read, pre, txn)).all().get();
            out("created 3");
            try {
                admin.createAcls(List.of(new AclBinding(new ResourcePattern(ResourceType.CLUSTER, "other", PatternType.LITERAL),
                    new AccessControlEntry("User:x", "*", AclOperation.ALTER, AclPermissionType.ALLOW)))).all().get();
                out("bad ok");
            } catch (Exception e) { out("bad " + e.getCause().getClass().getSimpleName()); }
            out("all " + admin.describeAcls(AclBindingFilter.ANY).values().get().size());
            AclBindingFilter match = new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.GROUP, "jgroup-1", PatternType.MATCH), AccessControlEntryFilter.ANY);
            for (AclBinding b : admin.describeAcls(match).values().get())
                out("match " + b.pattern().name() + " " + b.pattern().patternType() + " " + b.entry().host() + " "
                    + b.entry().permissionType());
            AclBindingFilter bob = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:bob", null, AclOperation.ANY, AclPermissionType.ANY));
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(bob)).all().get();
            out("deleted " + deleted.size() + " " + deleted.iterator().next().pattern().resourceType());
            out("left " + admin.describeAcls(AclBindingFilter.ANY).values().get().size());

            ClientQuotaEntity alice = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, "alice"));
            Map<String, String> dflt = new HashMap<>();
            dflt.put(ClientQuotaEntity.CLIENT_ID, null);
            ClientQuotaEntity defaultClient = new ClientQuotaEntity(dflt);
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(alice, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                                                         new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))),
                new ClientQuotaAlteration(defaultClient, List.of(new ClientQuotaAlteration.Op("request_percentage", 50.0)))))
                .all().get();
            try {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice,
                    List.of(new ClientQuotaAlteration.Op("bogus_rate", 1.0))))).all().get();
                out("bogus ok");
            } catch (Exception e) { out("bogus " + e.getCause().getClass().getSimpleName()); }
            Map<ClientQuotaEntity, Map<String, Double>> q = admin.describeClientQuotas(
                ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice"))))
                .entities().get();
            out("quota " + new TreeMap<>(q.get(alice)));
            q = admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
            out("quotas " + q.size());
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice,
                List.of(new ClientQuotaAlteration.Op("consumer_byte_rate", null))))).all().get();
            q = admin.describeClientQuotas(ClientQuotaFilter.contains(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice")))).entities().get();
            out("after " + new TreeMap<>(q.get(alice)));

            // KIP-612: an ip entity (an address, and the default ip) takes only connection_creation_rate
            ClientQuotaEntity ip = new ClientQuotaEntity(Map.of(ClientQuotaEntity.IP, "10.1.2.3"));
            Map<String, String> dip = new HashMap<>();
            dip.put(ClientQuotaEntity.IP, null);
            ClientQuotaEntity defaultIp = new ClientQuotaEntity(dip);
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(ip, List.of(new ClientQuotaAlteration.Op("connection_creation_rate", 7.0))),
                new ClientQuotaAlteration(defaultIp,
                    List.of(new ClientQuotaAlteration.Op("connection_creation_rate", 500.0))))).all().get();
            try {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(ip,
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1.0))))).all().get();
                out("ip-bogus ok");
            } catch (Exception e) {
                out("ip-bogus " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
            q = admin.describeClientQuotas(ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntityType(ClientQuotaEntity.IP)))).entities().get();
            out("ip-quotas " + q.size() + " " + new TreeMap<>(q.get(ip)) + " " + new TreeMap<>(q.get(defaultIp)));

            // KIP-430: the operations the caller may do, as Metadata / DescribeCluster report them
            admin.createTopics(List.of(new NewTopic("jops", 1, (short) 1))).all().get();
            TopicDescription td = admin.describeTopics(List.of("jops"),
                new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames().get().get("jops");
            out("topic-ops " + new TreeSet<>(td.authorizedOperations()));
            out("cluster-ops " + new TreeSet<>(admin.describeCluster(
                new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations().get()));
        }
    }
}
"""


@pytest.fixture(scope="module")
def security_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH")
    cp = jars.classpath()
    out = tmp_path_factory.mktemp("secjava")
    src = out / "SecurityAdmin.java"
    src.write_text(SOURCE)
    proc = subprocess.run(["javac", "-cp", cp, "-d", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return f"{out}:{cp}"


def test_java_admin_acls_and_quotas(broker_factory: Any, security_classpath: str) -> None:
    b = broker_factory({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                        "super.users": "User:ANONYMOUS"})
    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", security_classpath, "SecurityAdmin", b.bootstrap],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["created 3", "bad InvalidRequestException", "all 3"], lines
    assert "match jgroup- PREFIXED 10.1.2.3 DENY" in lines
    assert "deleted 1 TRANSACTIONAL_ID" in lines and "left 2" in lines
    assert "bogus InvalidRequestException" in lines
    assert "quota {consumer_byte_rate=2048.0, producer_byte_rate=1024.0}" in lines
    assert "quotas 2" in lines and "after {producer_byte_rate=1024.0}" in lines
    assert "ip-bogus InvalidRequestException: Invalid configuration key producer_byte_rate" in lines, lines
    assert "ip-quotas 2 {connection_creation_rate=7.0} {connection_creation_rate=500.0}" in lines, lines
    # a super user may do every operation the resource type supports
    assert "topic-ops [READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]" in lines, lines
    assert "cluster-ops [CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE]" \
        in lines, lines

    # What Java wrote, as the samsa tools see it.
    def samsa(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "broker.cli", *args, "--bootstrap-server", b.bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    listed = samsa("acls", "--list")
    assert "name=jtopic, patternType=LITERAL" in listed and "(principal=User:alice, host=*, operation=READ" in listed
    assert "jtx" not in listed
    assert "Quota configs for the default client-id are request_percentage=50.0" in \
        samsa("configs", "--describe", "--entity-type", "clients")
    ips = samsa("configs", "--describe", "--entity-type", "ips")
    assert "Quota configs for ip '10.1.2.3' are connection_creation_rate=7.0" in ips, ips
    assert "Quota configs for the default ip are connection_creation_rate=500.0" in ips, ips
