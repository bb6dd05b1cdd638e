"""Feature flags (KIP-584) with the Java AdminClient (kafka-clients 3.9.1): ``describeFeatures``
reads them from ApiVersions, ``updateFeatures`` sends UpdateFeatures.

The broker finalizes ``transaction.version`` 2 (transactions v2, KIP-890); the program reads it,
tries an upgrade past the supported range and a downgrade without the downgrade type (both
refused), validates and then applies a safe downgrade to 1, and reads the features again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.java import compile_java, run_java

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

SOURCE = r"""
import java.util.*;
import org.apache.kafka.clients.admin.*;

public class FeaturesCompat {
    static void describe(Admin admin) throws Exception {
        FeatureMetadata m = admin.describeFeatures().featureMetadata().get();
        for (Map.Entry<String, FinalizedVersionRange> e : new TreeMap<>(m.finalizedFeatures()).entrySet())
            System.out.println("finalized " + e.getKey() + " " + e.getValue().minVersionLevel() + " " + e.getValue().maxVersionLevel());
        for (Map.Entry<String, SupportedVersionRange> e : new TreeMap<>(m.supportedFeatures()).entrySet())
            System.out.println("supported " + e.getKey() + " " + e.getValue().minVersion() + " " + e.getValue().maxVersion());
        System.out.println("epoch " + m.finalizedFeaturesEpoch().orElse(-1L));
    }

    static void update(Admin admin, String label, short level, FeatureUpdate.UpgradeType type, boolean validateOnly) {
        try {
            admin.updateFeatures(Map.of("transaction.version", new FeatureUpdate(level, type)),
                new UpdateFeaturesOptions().validateOnly(validateOnly)).all().get();
            System.out.println(label + " ok");
        } catch (Exception e) {
            System.out.println(label + " " + e.getCause().getClass().getSimpleName());
        }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(p)) {
            describe(admin);
            update(admin, "too-high", (short) 3, FeatureUpdate.UpgradeType.UPGRADE, false);
            update(admin, "no-downgrade-type", (short) 1, FeatureUpdate.UpgradeType.UPGRADE, false);
            update(admin, "validate", (short) 1, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE, true);
            update(admin, "downgrade", (short) 1, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE, false);
            describe(admin);
        }
    }
}
"""


@pytest.fixture(scope="module")
def features_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    out: Path = tmp_path_factory.mktemp("features-java")
    return compile_java(SOURCE, "FeaturesCompat", out)


def test_java_admin_describes_and_updates_transaction_version(broker: Any, features_classpath: str) -> None:
    lines = run_java(features_classpath, "FeaturesCompat", broker.bootstrap)
    first = lines[:lines.index("too-high InvalidUpdateVersionException")]
    assert "finalized transaction.version 2 2" in first
    assert "supported transaction.version 0 2" in first
    epoch = int(next(ln for ln in first if ln.startswith("epoch ")).split()[1])
    rest = lines[len(first):]
    assert rest[:4] == ["too-high InvalidUpdateVersionException", "no-downgrade-type InvalidUpdateVersionException",
                        "validate ok", "downgrade ok"], lines
    assert "finalized transaction.version 1 1" in rest
    assert f"epoch {epoch + 1}" in rest
