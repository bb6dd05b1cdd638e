"""The registry's operations, in Confluent's terms; the REST layer (:mod:`.rest`) maps HTTP onto them.

Reads come from :class:`~.state.RegistryState`; writes become ``_schemas`` records through
:class:`~.store.KafkaStore` and are visible when read back. Writes are serialized by one lock so
that "next version" and "next id" are decided against the state every earlier write left
(only the primary writes, so ids are unique across the cluster).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from . import compatibility, errors, formats, state
from .formats import Dependency, ParsedSchema, Reference
from .json_types import Json, JsonObject
from .state import RegistryState, StoredSchema, SubjectVersion

if TYPE_CHECKING:
    from .store import KafkaStore

log = logging.getLogger("samsa.schema_registry")

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
INT_MAX = 2**31 - 1


class Registry:
    def __init__(self, st: RegistryState, store: KafkaStore) -> None:
        self.state = st
        self.store = store
        self._write_lock = asyncio.Lock()
        # (type, references, fingerprint) -> the smallest id with it; ids are never reused, and a
        # permanently deleted version leaves its id's schema in place, so entries stay valid
        self._by_fingerprint: dict[tuple[str, tuple[Reference, ...], str], int] = {}
        self._indexed: set[int] = set()

    # --- helpers ----------------------------------------------------------------------------

    def compatibility_level(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.configs:
            return self.state.configs[subject]
        return self.state.configs.get(None, compatibility.DEFAULT_LEVEL)

    def normalize(self, subject: str | None, asked: bool) -> bool:
        """``normalize=true`` on the request, else the subject's ``normalize`` config, else the global one."""
        if asked:
            return True
        if subject is not None and subject in self.state.normalize:
            return self.state.normalize[subject]
        return self.state.normalize.get(None, False)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def parsed(self, stored: StoredSchema) -> ParsedSchema:
        return parse_stored(self.state, stored)

    def _dependencies(self, refs: tuple[Reference, ...]) -> list[Dependency]:
        return _dependencies(self.state, refs, 0)

    async def parse_request(self, body: JsonObject, normalize: bool) -> ParsedSchema:
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        if schema_type not in formats.SCHEMA_TYPES:
            raise errors.RegistryError(422, 422, f"Invalid schemaType {body.get('schemaType')!r}: expected one of "
                                                 f"{', '.join(formats.SCHEMA_TYPES)}")
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise errors.RegistryError(422, 42201, "Empty schema")
        raw_refs = body.get("references") or []
        if not isinstance(raw_refs, list):
            raise errors.invalid_schema("references must be a list")
        refs = []
        for r in raw_refs:
            name, ref_subject, version = (r.get("name"), r.get("subject"), r.get("version")) \
                if isinstance(r, dict) else (None, None, None)
            if not isinstance(name, str) or not isinstance(ref_subject, str) or not isinstance(version, int) or \
                    isinstance(version, bool):
                raise errors.invalid_schema(f"invalid reference {r!r}: needs name, subject and version")
            if version == -1:  # "latest", as Confluent allows in a reference
                live = self.state.versions(ref_subject)
                if not live:
                    raise errors.invalid_schema(f"reference {name}: subject {ref_subject!r} has no versions")
                version = live[-1].version
            refs.append(Reference(name, ref_subject, version))
        deps = self._dependencies(tuple(refs))
        if schema_type == formats.PROTOBUF:
            # protoc runs as a child process: off the event loop
            return await asyncio.to_thread(formats.parse, schema_type, text, tuple(refs), deps, normalize)
        return formats.parse(schema_type, text, tuple(refs), deps, normalize)

    def _matching(self, subject: str, schema: ParsedSchema, deleted: bool = False) -> SubjectVersion | None:
        for sv in reversed(self.state.versions(subject, deleted=deleted)):
            stored = self.state.schemas[sv.schema_id]
            if stored.schema_type == schema.schema_type and stored.references == schema.references and \
                    self.parsed(stored).fingerprint == schema.fingerprint:
                return sv
        return None

    def _existing_id(self, schema: ParsedSchema) -> int | None:
        """The id of the same schema under any subject (ids are per schema), via a lazily grown index."""
        for sid in sorted(self.state.schemas.keys() - self._indexed):
            self._indexed.add(sid)
            stored = self.state.schemas[sid]
            try:
                key = (stored.schema_type, stored.references, self.parsed(stored).fingerprint)
            except errors.RegistryError:
                continue
            self._by_fingerprint.setdefault(key, sid)
        found = self._by_fingerprint.get((schema.schema_type, schema.references, schema.fingerprint))
        return found if found is not None and found in self.state.schemas else None

    def get_subject_version(self, subject: str, version: str | int, deleted: bool = False) -> SubjectVersion:
        all_versions = self.state.versions(subject, deleted=True)
        if not all_versions:
            raise errors.subject_not_found(subject)
        live = self.state.versions(subject, deleted=deleted)
        if version in ("latest", -1, "-1"):
            if not live:
                raise errors.subject_not_found(subject)
            return live[-1]
        v = parse_version(version)
        for sv in live:
            if sv.version == v:
                return sv
        raise errors.version_not_found(v)

    # --- writes -----------------------------------------------------------------------------

    async def register(self, subject: str, body: JsonObject, normalize: bool) -> dict[str, int]:
        if not valid_subject(subject):
            raise errors.invalid_subject(subject)
        await self.store.wait_ready()
        schema = await self.parse_request(body, self.normalize(subject, normalize))
        async with self._write_lock:
            mode = self.mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.operation_not_permitted(f"Subject {subject} in context . is in read-only mode")
            want_id = body.get("id")
            want_version = body.get("version")
            existing = self._matching(subject, schema)
            if existing is not None and want_id in (None, existing.schema_id):
                return {"id": existing.schema_id, "version": existing.version}
            if mode != "IMPORT" and (want_id is not None and want_id not in (-1, 0)):
                raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
            live = self.state.versions(subject)
            if mode != "IMPORT":
                level = self.compatibility_level(subject)
                previous = [self.parsed(self.state.schemas[sv.schema_id]) for sv in live]
                problems = compatibility.check(level, schema, previous)
                if problems:
                    raise errors.incompatible(subject, problems)
            everything = self.state.versions(subject, deleted=True)
            version = (everything[-1].version + 1) if everything else 1
            if isinstance(want_version, int) and not isinstance(want_version, bool) and want_version > 0:
                if mode != "IMPORT" and want_version != version:
                    raise errors.invalid_version(want_version)
                version = want_version
            if mode == "IMPORT" and isinstance(want_id, int) and want_id > 0:
                taken = self.state.schemas.get(want_id)
                if taken is not None and (taken.schema_type, taken.references) != (schema.schema_type,
                                                                                    schema.references) or \
                        taken is not None and self.parsed(taken).fingerprint != schema.fingerprint:
                    raise errors.RegistryError(422, 42207, f"Overwrite new schema with id {want_id} is not permitted.")
                schema_id = want_id
            else:
                found = self._existing_id(schema)
                schema_id = found if found is not None else self.state.max_id + 1
            await self.store.write(state.schema_key(subject, version),
                                   state.schema_value(subject, version, schema_id, schema.schema_type, schema.text,
                                                      schema.references, False))
            log.info("Schema registry: registered %s schema id %d as subject %s version %d", schema.schema_type,
                     schema_id, subject, version)
            return {"id": schema_id, "version": version}

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        await self.store.wait_ready()
        async with self._write_lock:
            self._check_writable(subject)
            if permanent:
                sv = self.get_subject_version(subject, version, deleted=True)
                if not sv.deleted:
                    raise errors.version_not_soft_deleted(subject, sv.version)
            else:
                everything = self.state.versions(subject, deleted=True)
                if not everything:
                    raise errors.subject_not_found(subject)
                if version not in ("latest", "-1"):
                    v = parse_version(version)
                    hit = next((s for s in everything if s.version == v), None)
                    if hit is None:
                        raise errors.version_not_found(v)
                    if hit.deleted:
                        raise errors.version_soft_deleted(subject, v)
                sv = self.get_subject_version(subject, version)
            if self.state.referenced_by(subject, sv.version):
                raise errors.reference_exists(subject, sv.version)
            stored = self.state.schemas[sv.schema_id]
            if permanent:
                await self.store.write(state.schema_key(subject, sv.version), None)
            else:
                await self.store.write(state.schema_key(subject, sv.version),
                                       state.schema_value(subject, sv.version, sv.schema_id, stored.schema_type,
                                                          stored.schema, stored.references, True))
            return sv.version

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        await self.store.wait_ready()
        async with self._write_lock:
            self._check_writable(subject)
            everything = self.state.versions(subject, deleted=True)
            if not everything:
                raise errors.subject_not_found(subject)
            live = [sv for sv in everything if not sv.deleted]
            for sv in everything:
                if self.state.referenced_by(subject, sv.version):
                    raise errors.reference_exists(subject, sv.version)
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                for sv in everything:
                    await self.store.write(state.schema_key(subject, sv.version), None)
                if self.state.has_config(subject):
                    await self.store.write(state.config_key(subject), None)
                if subject in self.state.modes:
                    await self.store.write(state.mode_key(subject), None)
                return [sv.version for sv in everything]
            if not live:
                raise errors.subject_soft_deleted(subject)
            await self.store.write(state.delete_subject_key(subject),
                                   state.delete_subject_value(subject, everything[-1].version))
            return [sv.version for sv in live]

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} in context . is in read-only mode")

    async def set_config(self, subject: str | None, level: Json, normalize: Json = None) -> dict[str, Json]:
        """Merged into the config there is, as Confluent's ConfigValue.merge: what is not given stays."""
        await self.store.wait_ready()
        if level is None and normalize is None or level is not None and (
                not isinstance(level, str) or level.upper() not in compatibility.LEVELS):
            raise errors.invalid_compatibility_level(level)
        if normalize is not None and not isinstance(normalize, bool):
            raise errors.invalid_input(f"normalize must be true or false, not {normalize!r}")
        async with self._write_lock:
            new_level = level.upper() if isinstance(level, str) else self.state.configs.get(subject)
            new_normalize = normalize if normalize is not None else self.state.normalize.get(subject)
            await self.store.write(state.config_key(subject), state.config_value(new_level, subject, new_normalize))
        out: dict[str, Json] = {}
        if isinstance(level, str):
            out["compatibility"] = level.upper()
        if normalize is not None:
            out["normalize"] = normalize
        return out

    async def delete_config(self, subject: str | None) -> str:
        await self.store.wait_ready()
        async with self._write_lock:
            if subject is not None and not self.state.has_config(subject):
                raise errors.subject_config_not_found(subject)
            previous = self.compatibility_level(subject)
            await self.store.write(state.config_key(subject), None)
        return previous

    async def set_mode(self, subject: str | None, mode: Json, force: bool) -> str:
        await self.store.wait_ready()
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        async with self._write_lock:
            if mode == "IMPORT" and not force:
                has = self.state.versions(subject) if subject is not None else self.state.subject_names()
                if has:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects" if subject is None
                        else f"Cannot import since found existing subject {subject}")
            await self.store.write(state.mode_key(subject), state.mode_value(mode, subject))
        return mode

    async def delete_mode(self, subject: str) -> str:
        await self.store.wait_ready()
        async with self._write_lock:
            if subject not in self.state.modes:
                raise errors.subject_mode_not_found(subject)
            previous = self.state.modes[subject]
            await self.store.write(state.mode_key(subject), None)
        return previous

    # --- checks -----------------------------------------------------------------------------

    async def check_compatibility(self, subject: str, version: str | None, body: JsonObject,
                                  normalize: bool, verbose: bool) -> JsonObject:
        schema = await self.parse_request(body, self.normalize(subject, normalize))
        live = self.state.versions(subject)
        if version is not None:
            if not live and not self.state.versions(subject, deleted=True):
                raise errors.subject_not_found(subject)
            against = [self.get_subject_version(subject, version)]
            level = self.compatibility_level(subject)
            base = level.removesuffix("_TRANSITIVE")
            level = base
        else:
            against = live
            level = self.compatibility_level(subject)
        previous = [self.parsed(self.state.schemas[sv.schema_id]) for sv in against]
        problems = compatibility.check(level, schema, previous)
        out: JsonObject = {"is_compatible": not problems}
        if verbose:
            out["messages"] = list[Json](problems)
        return out


def parse_stored(st: RegistryState, stored: StoredSchema, depth: int = 0) -> ParsedSchema:
    """A stored schema parsed, its references resolved through ``st`` (RegistryError 42201 if one is gone)."""
    deps = _dependencies(st, stored.references, depth)
    return formats.parse(stored.schema_type, stored.schema, stored.references, deps)


def _dependencies(st: RegistryState, refs: tuple[Reference, ...], depth: int) -> list[Dependency]:
    if depth > 32:
        raise errors.invalid_schema("references nest deeper than 32 levels (a cycle?)")
    out = []
    for r in refs:
        sv = st.subjects.get(r.subject, {}).get(r.version)
        if sv is None:
            raise errors.invalid_schema(f"reference {r.name} names subject {r.subject!r} version {r.version}, "
                                        "which does not exist")
        out.append(Dependency(r.name, parse_stored(st, st.schemas[sv.schema_id], depth + 1)))
    return out


def valid_subject(subject: str) -> bool:
    """Confluent's QualifiedSubject.isValidSubject: no control characters, not a reserved name."""
    return bool(subject) and subject not in ("__GLOBAL", "__EMPTY") and \
        not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in subject)


def parse_version(version: Json) -> int:
    if isinstance(version, int) and not isinstance(version, bool):
        v = version
    elif isinstance(version, str) and version.lstrip("-").isdigit():
        v = int(version)
    else:
        raise errors.invalid_version(version)
    if v == -1:
        return v
    if v < 1 or v > INT_MAX:
        raise errors.invalid_version(version)
    return v
