"""SASL/PLAIN (RFC 4616) on the server: one message ``[authzid] NUL authcid NUL passwd``.

Users and passwords come from the listener's PlainLoginModule JAAS options
(``user_<name>="<password>"``), as Kafka's PlainServerCallbackHandler reads them. Passwords
are compared in constant time; an authorization id, when given, must equal the user name.
"""

from __future__ import annotations

import hmac

from .scram import SaslAuthenticationError

FAILED = "Authentication failed: Invalid username or password"


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Unexpected SASL/PLAIN message after authentication completed")
        try:
            parts = token.decode("utf-8").split("\x00")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN message: not UTF-8") from None
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        authzid, user, password = parts
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(user)
        # compare against something even for unknown users, so timing does not tell them apart
        ok = hmac.compare_digest((expected or "\x00unknown").encode(), password.encode()) and expected is not None
        if not ok:
            raise SaslAuthenticationError(FAILED)
        if authzid and authzid != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        self.username = user
        self.complete = True
        return b""
