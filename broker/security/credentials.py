"""The SCRAM credential store: salted credentials per user and mechanism, persisted.

Kept in ``<log.dirs[0]>/samsa-scram-credentials.json`` (the single broker's metadata, beside
``samsa-metadata.json``) as salt, StoredKey, ServerKey and iterations, base64-encoded: what
Kafka keeps in ZooKeeper under ``/config/users/<user>``. The password and the salted password
are never stored. Writes are atomic (temp file, fsync, rename) and happen before a change is
answered, so an acknowledged AlterUserScramCredentials survives a crash.

In a cluster (``zookeeper.connect``) the store lives in ZooKeeper instead, where Kafka keeps it:
each user's ``/config/users/<user>`` config map holds ``SCRAM-SHA-256=salt=...,stored_key=...,
server_key=...,iterations=N`` beside any quota keys (which are preserved), and a change is
announced under ``/config/changes`` so every broker reloads that user (:meth:`use_zookeeper`).
ZooKeeper is read and written off the event loop (:mod:`.zk_access`); a change ZooKeeper did not
take (slow or unreachable: REQUEST_TIMED_OUT) changes nothing in memory either.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .scram import MECHANISM_IDS, ScramCredential
from .zk_access import EntityChangeListener, EntityConfigs, ZkSequencer, zk_request

UserCredentials = dict[str, ScramCredential]  # mechanism name -> credential


def _to_kafka_string(c: ScramCredential) -> str:
    """Kafka's ScramCredentialUtils.credentialToString."""
    j = c.to_json()
    return f"salt={j['salt']},stored_key={j['stored_key']},server_key={j['server_key']},iterations={j['iterations']}"


def _from_kafka_string(text: str) -> ScramCredential:
    d = dict(part.split("=", 1) for part in text.split(","))
    return ScramCredential.from_json(d)  # type: ignore[arg-type]


class CredentialStore:
    FILE = "samsa-scram-credentials.json"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._users: dict[str, UserCredentials] = {}
        if path.exists():
            data = json.loads(path.read_text())
            for user, mechs in data.get("users", {}).items():
                self._users[user] = {m: ScramCredential.from_json(c) for m, c in mechs.items()}

        self._zk: EntityConfigs | None = None
        self.sequencer = ZkSequencer("SCRAM credentials")

    # --- ZooKeeper (cluster mode) -------------------------------------------------------------------
    def use_zookeeper(self, zk: EntityConfigs, change_listeners: list[EntityChangeListener]) -> None:
        """Serve and persist credentials from ZooKeeper; reload a user on its change notification."""
        self._zk = zk
        self._users = {}
        for user in zk.children("/config/users"):  # at start-up, before any client is served
            if "/" not in user:
                self._set_user(user, zk.get_entity_config("users", user))
        change_listeners.append(lambda kind, name: self._reload_soon(name) if kind == "users" else None)

    def _reload_soon(self, user: str) -> None:
        """A change notice for ``user``: read its config off the loop, apply it here, in turn."""
        zk = self._zk
        if "/" in user or zk is None:  # users/<u>/clients/<c>: quota entities only
            return

        async def reload() -> None:
            self._set_user(user, await zk_request(zk, zk.get_entity_config, "users", user))
        self.sequencer.reload_soon(reload, key=user, what=f"the SCRAM credentials of {user}")

    def _set_user(self, user: str, cfg: dict[str, str]) -> None:
        creds = {}
        for mech in MECHANISM_IDS:
            if mech in cfg:
                try:
                    creds[mech] = _from_kafka_string(cfg[mech])
                except (KeyError, ValueError):
                    continue
        if creds:
            self._users[user] = creds
        else:
            self._users.pop(user, None)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(m) for u, m in self._users.items() if m}

    async def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletes: list[tuple[str, str]]) -> None:
        """Store the changes, then use them; KafkaError (nothing changed) when ZooKeeper failed."""
        async with self.sequencer.lock:  # computed from, and applied over, the previous change
            users = {u: dict(m) for u, m in self._users.items()}
            for user, mech in deletes:
                users.get(user, {}).pop(mech, None)
                if not users.get(user, True):
                    users.pop(user, None)
            for user, mech, cred in upserts:
                users.setdefault(user, {})[mech] = cred
            if self._zk is not None:
                touched = dict.fromkeys([u for u, _ in deletes] + [u for u, _, _ in upserts])
                await zk_request(self._zk, self._write_users, self._zk, {u: users.get(u, {}) for u in touched})
                self._users = users
                return
            self._users = users
            self._persist()

    @staticmethod
    def _write_users(zk: EntityConfigs, creds: dict[str, UserCredentials]) -> None:  # a ZooKeeper thread
        """Each user's ``/config/users/<user>`` with its SCRAM keys replaced (quota keys kept), announced."""
        for user, mechs in creds.items():
            current = zk.get_entity_config("users", user)
            merged = {k: v for k, v in current.items() if k not in MECHANISM_IDS}
            merged.update({m: _to_kafka_string(c) for m, c in mechs.items()})
            zk.set_entity_config("users", user, merged, notify=True)

    def _persist(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        data = {"version": 1, "users": {u: {m: c.to_json() for m, c in mechs.items()}
                                        for u, mechs in self._users.items()}}
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
