"""The registry's state, rebuilt from the ``_schemas`` topic by :meth:`RegistryState.replay`.

Records are Confluent's exactly as its registry (7.x-8.x) writes them: the key and value are
compact JSON, properties in Confluent's order (keys ``keytype``, ``subject``, ``version``,
``magic``), null and empty properties left out (Jackson's NON_EMPTY), so a ``_schemas`` topic
can move between Samsa and Confluent's registry. Older forms are read too: Karapace's and
older Confluent's global keys with ``"subject":null`` and values without ``schemaType`` (AVRO).

=================  ===========================================================  =====================
key                value                                                        meaning
=================  ===========================================================  =====================
SCHEMA             ``{"subject","version","id","schemaType"[,"references"],     a version registered
                   "schema","deleted"}``                                        (or soft deleted)
SCHEMA             null (tombstone)                                             version hard deleted
CONFIG             ``{["subject",]["compatibilityLevel"][,"normalize"]}`` / null  config set / removed
MODE               ``{["subject",]"mode"}`` / null                              mode set / removed
DELETE_SUBJECT     ``{"subject", "version"}``                                   versions <= version
                                                                                soft deleted
NOOP               none                                                         a marker the writer
                                                                                waits to read back
=================  ===========================================================  =====================

A CONFIG or MODE key without a ``subject`` (or with a null one) is the global one.

Invariant: this state changes only in :meth:`replay`, called by the one reader task of the
store in the topic's offset order, for records read back from the topic, on this node and every
other (Confluent's KafkaStore design): a write becomes visible when it has been read back,
which is what makes every node of a cluster agree. An unreadable record is logged and skipped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TypeVar

from .formats import Reference
from .json_types import Json, JsonObject

log = logging.getLogger("samsa.schema_registry")

T = TypeVar("T")

SCHEMA, CONFIG, DELETE_SUBJECT, NOOP, MODE = "SCHEMA", "CONFIG", "DELETE_SUBJECT", "NOOP", "MODE"


def _compact(doc: Json) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _compact({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    # Confluent leaves out what is null: the global config's key has no "subject"
    doc: JsonObject = {"keytype": CONFIG}
    if subject is not None:
        doc["subject"] = subject
    doc["magic"] = 0
    return _compact(doc)


def mode_key(subject: str | None) -> bytes:
    doc: JsonObject = {"keytype": MODE}
    if subject is not None:
        doc["subject"] = subject
    doc["magic"] = 0
    return _compact(doc)


def delete_subject_key(subject: str) -> bytes:
    return _compact({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _compact({"keytype": NOOP, "magic": 0})


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: tuple[Reference, ...], deleted: bool) -> bytes:
    doc: JsonObject = {"subject": subject, "version": version, "id": schema_id, "schemaType": schema_type}
    if references:
        doc["references"] = [r.to_json() for r in references]
    doc["schema"] = schema
    doc["deleted"] = deleted
    return _compact(doc)


def config_value(level: str | None, subject: str | None = None, normalize: bool | None = None) -> bytes:
    """A whole config (Confluent writes the merged one each time); what is unset is left out."""
    doc: JsonObject = {} if subject is None else {"subject": subject}
    if level is not None:
        doc["compatibilityLevel"] = level
    if normalize is not None:
        doc["normalize"] = normalize
    return _compact(doc)


def mode_value(mode: str, subject: str | None = None) -> bytes:
    return _compact({"subject": subject, "mode": mode} if subject is not None else {"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _compact({"subject": subject, "version": version})


def _int(v: Json) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"{v!r} is not an integer")
    return int(v)


@dataclass
class StoredSchema:
    """One schema id: the same text, type and references under any number of subjects."""

    schema_id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]


@dataclass
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    deleted: bool


@dataclass
class RegistryState:
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    subjects: dict[str, dict[int, SubjectVersion]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)  # compatibility levels
    normalize: dict[str | None, bool] = field(default_factory=dict)  # the ``normalize`` config
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    records: int = 0  # applied, for the metrics

    # --- replay -----------------------------------------------------------------------------

    def replay(self, key: bytes | None, value: bytes | None) -> None:
        try:
            k = json.loads(key) if key else None
            if not isinstance(k, dict):
                raise ValueError("key is not a JSON object")
            kt = k.get("keytype")
            v = json.loads(value) if value else None
            if v is not None and not isinstance(v, dict):
                raise ValueError("value is not a JSON object")
            if kt == SCHEMA:
                self._schema(k, v)
            elif kt == CONFIG:  # a whole config: what it leaves out is unset
                level = None if v is None or v.get("compatibilityLevel") is None else str(v["compatibilityLevel"])
                self._setting(self.configs, k, None if level is None else level.upper())
                normalize = None if v is None else v.get("normalize")
                self._setting(self.normalize, k, None if normalize is None else bool(normalize))
            elif kt == MODE:
                self._setting(self.modes, k, None if v is None else str(v["mode"]).upper())
            elif kt == DELETE_SUBJECT:
                if v is not None:
                    for sv in self.subjects.get(str(v["subject"]), {}).values():
                        if sv.version <= _int(v["version"]):
                            sv.deleted = True
            elif kt != NOOP:
                raise ValueError(f"unknown keytype {kt!r}")
            self.records += 1
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            log.warning("Schema registry: skipping an unreadable _schemas record (key %r): %s",
                        (key or b"")[:200], e)

    def _schema(self, k: JsonObject, v: JsonObject | None) -> None:
        subject, version = str(k["subject"]), _int(k["version"])
        if v is None:  # tombstone: hard delete
            versions = self.subjects.get(subject)
            if versions is not None:
                versions.pop(version, None)
                if not versions:
                    del self.subjects[subject]
            return
        schema_id = _int(v["id"])
        raw_refs = v.get("references") or []
        if not isinstance(raw_refs, list) or not all(isinstance(r, dict) for r in raw_refs):
            raise ValueError("references is not a list of objects")
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), _int(r["version"]))
                     for r in raw_refs if isinstance(r, dict))
        if schema_id not in self.schemas:
            self.schemas[schema_id] = StoredSchema(schema_id, str(v.get("schemaType") or "AVRO").upper(),
                                                   str(v["schema"]), refs)
        self.max_id = max(self.max_id, schema_id)
        self.subjects.setdefault(subject, {})[version] = SubjectVersion(subject, version, schema_id,
                                                                        bool(v.get("deleted", False)))

    @staticmethod
    def _setting(table: dict[str | None, T], k: JsonObject, value: T | None) -> None:
        subject = k.get("subject")
        subject = None if subject is None else str(subject)
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    # --- queries ----------------------------------------------------------------------------

    def has_config(self, subject: str | None) -> bool:
        return subject in self.configs or subject in self.normalize

    def versions(self, subject: str, deleted: bool = False) -> list[SubjectVersion]:
        return sorted((sv for sv in self.subjects.get(subject, {}).values() if deleted or not sv.deleted),
                      key=lambda sv: sv.version)

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({sv.schema_id for vs in self.subjects.values() for sv in vs.values() if not sv.deleted
                       and any(r.subject == subject and r.version == version
                               for r in self.schemas[sv.schema_id].references)})

    def usages(self, schema_id: int, deleted: bool = False) -> list[SubjectVersion]:
        return sorted((sv for vs in self.subjects.values() for sv in vs.values()
                       if sv.schema_id == schema_id and (deleted or not sv.deleted)),
                      key=lambda sv: (sv.subject, sv.version))
