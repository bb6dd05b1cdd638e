"""Kafka's ``sasl.jaas.config`` syntax: one JAAS login module entry.

``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";``

is a login module class, a control flag (required, requisite, sufficient, optional), options
``key=value`` (values quoted or bare) and a closing ``;``. Broker side, PLAIN's
``user_<name>="<password>"`` options are its user database; ``username``/``password`` are the
credentials the broker itself uses as a client of the inter-broker listener.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import SecurityConfigError

FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PLAIN's user database: ``user_<name>`` options."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse_jaas(text: str) -> JaasEntry:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise SecurityConfigError(f"Invalid sasl.jaas.config: unexpected {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("str", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("word", m.group(2)))
        elif m.group(3):
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" or tokens[1][1].lower() not in FLAGS:
        raise SecurityConfigError("Invalid sasl.jaas.config: expected '<LoginModule> required key=\"value\" ... ;'")
    if tokens[-1][0] != ";":
        raise SecurityConfigError("Invalid sasl.jaas.config: the entry must end with ';'")
    opts: dict[str, str] = {}
    body = tokens[2:-1]
    i = 0
    while i < len(body):
        try:
            (k_kind, key), (eq, _), (v_kind, value) = body[i], body[i + 1], body[i + 2]
        except IndexError:
            raise SecurityConfigError("Invalid sasl.jaas.config: an option is missing its value") from None
        if k_kind != "word" or eq != "=" or v_kind not in ("str", "word"):
            raise SecurityConfigError(f"Invalid sasl.jaas.config near option {key!r}")
        opts[key] = value
        i += 3
    if len([t for t in tokens if t[0] == ";"]) > 1:
        raise SecurityConfigError("Invalid sasl.jaas.config: exactly one login module entry is allowed")
    return JaasEntry(tokens[0][1], tokens[1][1].lower(), opts)


def client_jaas_config(entry: JaasEntry) -> str:
    """The client-side entry (same module, only ``username``/``password``)."""
    parts = [entry.login_module, "required"]
    for key in ("username", "password"):
        if key in entry.options:
            value = entry.options[key].replace("\\", "\\\\").replace('"', '\\"')
            parts.append(f'{key}="{value}"')
    return " ".join(parts) + ";"
