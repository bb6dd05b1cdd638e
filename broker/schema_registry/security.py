"""Who may use the registry: HTTP Basic against the broker's own users, subjects under its ACLs.

Authentication is on when any broker listener uses SASL: every request must carry
``Authorization: Basic`` credentials of a user the broker knows, checked as its SASL would
check them - a PLAIN user of a listener's ``PlainLoginModule`` JAAS config (``user_<name>``),
or a SCRAM user (the salted password recomputed from the credential's salt and iterations and
compared with its stored key, for SCRAM-SHA-256 or -512). A missing or wrong password is a 401
with Confluent's body and a ``WWW-Authenticate`` challenge.

Authorization is on when the broker has an authorizer (``authorizer.class.name``). Subjects
follow topic ACLs, as Confluent's topic-based schema registry authorizer does: a subject
``<topic>-key`` / ``<topic>-value`` (TopicNameStrategy) is the topic ``<topic>``, any other
subject the topic of its own name. Reading a subject needs DESCRIBE (or READ) on that topic,
registering or deleting needs WRITE; the global config and mode need DESCRIBE_CONFIGS /
ALTER_CONFIGS on the cluster, a subject's config WRITE on its topic; a schema by id may be
read by any authenticated user (it names no subject). A refusal is a 403 naming the operation
and subject, Confluent's 40301. Super users and ``allow.everyone.if.no.acl.found`` behave as for
Kafka requests.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
from typing import Protocol

from ..security.acl import ALTER_CONFIGS, CLUSTER, CLUSTER_NAME, DESCRIBE, DESCRIBE_CONFIGS, TOPIC, WRITE
from ..security.authorizer import AclAuthorizer
from ..security.credentials import CredentialStore
from ..security.jaas import parse_jaas
from ..security.scram import ScramCredential
from .errors import RegistryError
from .host import BrokerHost
from .http import Request

log = logging.getLogger("samsa.schema_registry")


def unauthorized() -> RegistryError:
    return RegistryError(401, 401, "Unauthorized")


def forbidden(operation: str, subject: str | None) -> RegistryError:
    what = f"Subject: {subject}" if subject is not None else "the global configuration"
    return RegistryError(403, 40301, f"User is denied operation {operation} on {what}")


def basic_credentials(req: Request) -> tuple[str, str]:
    """(user, password) of the request's ``Authorization: Basic``; a 401 without them."""
    header = req.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic" or not token:
        raise unauthorized()
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise unauthorized() from None
    if not sep or not user:
        raise unauthorized()
    return user, password


def subject_topic(subject: str) -> str:
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


class AccessGuard(Protocol):
    """Who may do what: the broker's own users and ACLs (:class:`RegistrySecurity`), or the
    cluster's, asked over Kafka by the standalone registry (:class:`~.cluster_auth.ClusterSecurity`)."""

    authenticate: bool  # requests need Basic credentials

    async def check(self, req: Request, operation: str, subject: str | None) -> None:
        """Raise 401/403 unless the request may do ``operation`` (read, write, delete, read_config,
        write_config) on ``subject`` (None: the global config, or no subject); sets ``req.principal``."""

    async def readable(self, req: Request, subjects: list[str]) -> set[str]:
        """Those of ``subjects`` the request's user may read (listings show only those)."""


class RegistrySecurity:
    """Built from the broker's security (listeners, credential store) and its authorizer."""

    def __init__(self, plain_users: dict[str, str], credentials: CredentialStore | None,
                 authorizer: AclAuthorizer | None,
                 authenticate: bool) -> None:
        self.plain_users = plain_users
        self.credentials = credentials
        self.authorizer = authorizer
        self.authenticate = authenticate

    @classmethod
    def from_broker(cls, broker: BrokerHost) -> RegistrySecurity | None:
        plain: dict[str, str] = {}
        sasl = False
        for ls in broker.security.listeners.values():
            lc = ls.config
            if not lc.security_protocol.uses_sasl:
                continue
            sasl = True
            if "PLAIN" in lc.enabled_mechanisms():
                jaas = lc.jaas_config("PLAIN")
                if jaas:
                    plain.update(parse_jaas(jaas).users())
        if not sasl and broker.authorizer is None:
            return None
        return cls(plain, broker.security.credentials, broker.authorizer, sasl)

    # --- authentication ---------------------------------------------------------------------

    def principal(self, req: Request) -> str:
        if not self.authenticate:
            return "User:ANONYMOUS"
        user, password = basic_credentials(req)
        if not self._check_password(user, password):
            log.info("Schema registry: failed authentication of user %r from %s", user, req.peer)
            raise unauthorized()
        return f"User:{user}"

    def _check_password(self, user: str, password: str) -> bool:
        expected = self.plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            cred = self.credentials.get(user, mechanism) if self.credentials is not None else None
            if cred is None:
                continue
            mine = ScramCredential.from_password(mechanism, password, cred.iterations, cred.salt)
            if hmac.compare_digest(mine.stored_key, cred.stored_key):
                return True
        return False

    # --- authorization ----------------------------------------------------------------------

    async def check(self, req: Request, operation: str, subject: str | None) -> None:
        """``operation`` as the REST layer names it: read, write, delete, read_config, write_config."""
        principal = self.principal(req)
        req.principal = principal
        if self.authorizer is None:
            return
        host = req.peer.rsplit(":", 1)[0] if req.peer else ""
        if subject is None:
            if operation in ("read", "delete", "write"):
                return  # schemas by id, listings (filtered by the caller), types
            op, name = (DESCRIBE_CONFIGS, "DescribeConfigs") if operation == "read_config" else \
                (ALTER_CONFIGS, "AlterConfigs")
            if not self.authorizer.authorize(principal, host, op, CLUSTER, CLUSTER_NAME, api="SchemaRegistry"):
                raise forbidden(name, None)
            return
        op, name = (DESCRIBE, "Read") if operation in ("read", "read_config") else (WRITE, "Write")
        if not self.authorizer.authorize(principal, host, op, TOPIC, subject_topic(subject), api="SchemaRegistry"):
            raise forbidden(name, subject)

    async def readable(self, req: Request, subjects: list[str]) -> set[str]:
        """Those of ``subjects`` the request's user may read (listings show only those)."""
        if self.authorizer is None:
            return set(subjects)
        host = req.peer.rsplit(":", 1)[0] if req.peer else ""
        return {s for s in subjects if self.authorizer.authorize(req.principal or "User:ANONYMOUS", host, DESCRIBE,
                                                                 TOPIC, subject_topic(s), api="SchemaRegistry",
                                                                 log_denied=False)}
