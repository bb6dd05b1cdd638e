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
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .scram import MECHANISM_IDS, ScramCredential
from .zk_access import EntityChangeListener, EntityConfigs


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
        self._users: dict[str, dict[str, ScramCredential]] = {}
        if path.exists():
            data = json.loads(path.read_text())
            for user, mechs in data.get("users", {}).items():
                self._users[user] = {m: ScramCredential.from_json(c) for m, c in mechs.items()}

        self._zk: EntityConfigs | None = None

    # --- ZooKeeper (cluster mode) -------------------------------------------------------------------
    def use_zookeeper(self, zk: EntityConfigs, change_listeners: list[EntityChangeListener]) -> None:
        """Serve and persist credentials from ZooKeeper; reload a user on its change notification."""
        self._zk = zk
        self._users = {}
        for user in zk.children("/config/users"):
            self._reload_user(user)
        change_listeners.append(lambda kind, name: self._reload_user(name) if kind == "users" else None)

    def _reload_user(self, user: str) -> None:
        if "/" in user:  # users/<u>/clients/<c>: quota entities only
            return
        if self._zk is None:  # a notice that arrived as the store left ZooKeeper: nothing to reload from
            return
        cfg = self._zk.get_entity_config("users", user)
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

    def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletes: list[tuple[str, str]]) -> None:
        for user, mech in deletes:
            self._users.get(user, {}).pop(mech, None)
            if not self._users.get(user, True):
                self._users.pop(user, None)
        for user, mech, cred in upserts:
            self._users.setdefault(user, {})[mech] = cred
        if self._zk is not None:
            for user in dict.fromkeys([u for u, _ in deletes] + [u for u, _, _ in upserts]):
                current = self._zk.get_entity_config("users", user)
                merged = {k: v for k, v in current.items() if k not in MECHANISM_IDS}
                merged.update({m: _to_kafka_string(c) for m, c in self._users.get(user, {}).items()})
                self._zk.set_entity_config("users", user, merged, notify=True)
            return
        self._persist()

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
