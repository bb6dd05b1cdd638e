"""``ssl.principal.mapping.rules``: from a client certificate's distinguished name to a principal name.

Pure parsing and matching (Kafka's SslPrincipalMapper), kept apart from tls.py so that a broker
without TLS listeners parses and validates the rules without loading the TLS libraries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SecurityConfigError


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        out = self.pattern.sub(self.replacement, dn, count=1)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


def parse_mapping_rules(text: str) -> list[MappingRule]:
    rules: list[MappingRule] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None:
            raise SecurityConfigError(f"Invalid ssl.principal.mapping.rules near {text[pos:pos + 30]!r}")
        pos = m.end()
        if m.group(1):
            rules.append(MappingRule(None))
        else:
            pattern = m.group(2).replace("\\/", "/")
            repl = re.sub(r"\$(\d)", r"\\\1", m.group(3).replace("\\/", "/"))
            try:
                rules.append(MappingRule(re.compile(pattern), repl, m.group(4)))
            except re.error as e:
                raise SecurityConfigError(f"Invalid pattern in ssl.principal.mapping.rules: {e}") from None
    return rules or [MappingRule(None)]
