"""Topic regular expressions for ``SubscribedTopicRegex``, in the RE2/J syntax Kafka accepts.

Kafka compiles a consumer group's regex with Google's RE2/J and matches whole topic names
(``Pattern.matcher(topic).matches()``). RE2 has no backtracking constructs, so a pattern using
one is invalid there even though Python's :mod:`re` would accept it. :func:`compile_topic_regex`
first rejects what RE2 rejects, translates the few RE2 spellings Python writes differently
(``\\z`` for end of text, POSIX classes such as ``[[:digit:]]``), then compiles with :mod:`re`.
It raises :class:`InvalidRegularExpression` (INVALID_REGULAR_EXPRESSION at the edge).

Not supported (answered as invalid rather than matched differently): Unicode classes
``\\p{..}``/``\\pL`` and RE2's ``\\C``.
"""

from __future__ import annotations

import functools
import re


class InvalidRegularExpression(ValueError):
    pass


# Constructs RE2 does not have: lookaround, backreferences, atomic groups, possessive
# quantifiers, conditionals, and Python's \Z (RE2 spells end-of-text \z).
_UNSUPPORTED = [
    (re.compile(r"\(\?[=!]"), "lookahead"),
    (re.compile(r"\(\?<[=!]"), "lookbehind"),
    (re.compile(r"\(\?>"), "atomic group"),
    (re.compile(r"\(\?\("), "conditional"),
    (re.compile(r"\(\?P="), "backreference"),
    (re.compile(r"\\[1-9]"), "backreference"),
    (re.compile(r"\\k<"), "backreference"),
    (re.compile(r"[*+?}]\+"), "possessive quantifier"),
    (re.compile(r"\\[pPC]"), "unicode class"),
    (re.compile(r"\\Z"), "\\Z"),
]

_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7F", "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z",
    "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_POSIX_RE = re.compile(r"\[:(\^?)([a-z]+):\]")


def _strip_escapes(pattern: str) -> str:
    """The pattern with escaped backslashes neutralised, so ``\\\\1`` is not a backreference."""
    return pattern.replace("\\\\", "__")


@functools.lru_cache(maxsize=256)
def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    if not pattern:
        raise InvalidRegularExpression("the regular expression is empty")
    scan = _strip_escapes(pattern)
    for rx, what in _UNSUPPORTED:
        if rx.search(scan):
            raise InvalidRegularExpression(f"{what} is not supported in RE2 syntax: {pattern!r}")

    def posix(m: re.Match[str]) -> str:
        negate, name = m.group(1), m.group(2)
        if name not in _POSIX:
            raise InvalidRegularExpression(f"unknown POSIX class [:{name}:] in {pattern!r}")
        if negate:
            raise InvalidRegularExpression(f"negated POSIX class inside a class in {pattern!r}")
        return _POSIX[name]

    translated = _POSIX_RE.sub(posix, pattern).replace("\\z", "\\Z")
    try:
        return re.compile(translated)
    except re.error as e:
        raise InvalidRegularExpression(f"invalid regular expression {pattern!r}: {e}") from None


def matching_topics(pattern: str, topics: list[str]) -> list[str]:
    rx = compile_topic_regex(pattern)
    return [t for t in topics if rx.fullmatch(t)]
