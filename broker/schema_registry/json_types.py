"""``Json``: a parsed JSON document (request bodies, ``_schemas`` records, Avro and JSON Schema
documents), as ``json.loads`` returns it. Narrow it with ``isinstance`` before use."""

from __future__ import annotations

from typing import TypeAlias

Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
JsonObject: TypeAlias = "dict[str, Json]"
