"""Kafka's textual Uuid form (``Uuid.toString``/``fromString``) and the topic registry's use of it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from broker.cluster.metadata import TopicRegistry
from protocol import kafka_uuid

# One id in both spellings (the base64 one as a Kafka broker logged it in issue 13).
DASHED = "27b460f8-fbfc-44c8-85a8-d11e9425aa2a"
KAFKA = "J7Rg-Pv8RMiFqNEelCWqKg"


def test_to_string_is_url_safe_base64_without_padding() -> None:
    u = uuid.UUID(DASHED)
    assert kafka_uuid.to_string(u) == KAFKA
    assert kafka_uuid.to_string(u.bytes) == KAFKA
    assert kafka_uuid.to_string(DASHED) == KAFKA
    assert kafka_uuid.to_string(kafka_uuid.ZERO) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_from_string_accepts_both_spellings_and_refuses_garbage() -> None:
    assert kafka_uuid.from_string(KAFKA) == uuid.UUID(DASHED)
    assert kafka_uuid.from_string(DASHED) == uuid.UUID(DASHED)
    for bad in ("", "not-an-id", "J7Rg-Pv8RMiFqNEelCWqK!", KAFKA + "x"):
        with pytest.raises(ValueError):
            kafka_uuid.from_string(bad)


def test_registry_writes_kafka_form_and_reads_old_dashed_files(tmp_path: Path) -> None:
    path = tmp_path / "samsa-metadata.json"
    path.write_text(json.dumps({"version": 1, "cluster_id": "c", "topics": {
        "old": {"topic_id": DASHED, "partitions": 2, "configs": {}}}}))
    reg = TopicRegistry(path)
    reg.load()
    info = reg.get("old")
    assert info is not None and info.topic_id == uuid.UUID(DASHED)
    assert reg.by_id(uuid.UUID(DASHED)) is info
    new = reg.create("new", 1)
    saved = json.loads(path.read_text())["topics"]
    assert saved["new"]["topic_id"] == kafka_uuid.to_string(new.topic_id)
    assert saved["old"]["topic_id"] == KAFKA
    again = TopicRegistry(path)
    again.load()
    assert again.get("new").topic_id == new.topic_id  # type: ignore[union-attr]
