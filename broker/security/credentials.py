"""The SCRAM credential store: salted credentials per user and mechanism, persisted.

Kept in ``<log.dirs[0]>/samsa-scram-credentials.json`` (the single broker's metadata, beside
``samsa-metadata.json``) as salt, StoredKey, ServerKey and iterations, base64-encoded: what
Kafka keeps in ZooKeeper under ``/config/users/<user>``. The password and the salted password
are never stored. Writes are atomic (temp file, fsync, rename) and happen before a change is
answered, so an acknowledged AlterUserScramCredentials survives a crash.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .scram import ScramCredential


class CredentialStore:
    FILE = "samsa-scram-credentials.json"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._users: dict[str, dict[str, ScramCredential]] = {}
        if path.exists():
            data = json.loads(path.read_text())
            for user, mechs in data.get("users", {}).items():
                self._users[user] = {m: ScramCredential.from_json(c) for m, c in mechs.items()}

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
