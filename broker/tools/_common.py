"""Shared plumbing for the ``samsa`` operator commands: flags, clients, tables, JSON, errors.

Every command talks to a broker over the Kafka wire protocol only (through kafka-python's
clients), exactly like Kafka's own ``bin/kafka-*.sh`` scripts; nothing here imports broker
internals, so the tools work against any Kafka-compatible broker. ``dump-log`` is the one
exception by design: like ``kafka-dump-log.sh`` it reads segment files from disk.

Output convention: people get aligned tables on stdout; ``--json`` prints one JSON document
(or one JSON object per line for streaming commands) for scripts. Errors go to stderr as
``Error: ...`` with exit status 1, never a traceback unless ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO, TypeAlias

from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError, KafkaError, NodeNotReadyError
from kafka.protocol.api_message import ApiMessage

from protocol import kafka_uuid
from protocol.errors import ErrorCode

# Parsed JSON (a plan file, an HTTP body, a ZooKeeper znode, the dicts kafka-python's admin client
# builds from responses) and the JSON documents the tools print: a real dynamic boundary, its shape
# checked where it is read. The one `Any` of the tools; the console and the Spark job use it too.
JSON: TypeAlias = Any

# What ``parser.add_subparsers()`` returns; each command module's ``register`` adds itself to it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

CLIENT_ID = "samsa-cli"


def format_uuid(value: uuid.UUID | bytes | str | None) -> str | None:
    """A topic or cluster id as Kafka's tools print it (URL-safe base64, ``J7Rg-Pv8RMiFqNEelCWqKg``);
    None for a missing or zero id. Accepts what clients hand back: ``uuid.UUID``, 16 bytes, or text."""
    if value is None or value == "":
        return None
    u = value if isinstance(value, uuid.UUID) else None
    if u is None:
        try:
            u = uuid.UUID(bytes=value) if isinstance(value, bytes) else kafka_uuid.from_string(str(value))
        except ValueError:
            return str(value)  # not an id we know how to read: show it as it came
    return None if u == kafka_uuid.ZERO else kafka_uuid.to_string(u)


class ToolError(Exception):
    """A user-facing failure: printed as ``Error: <message>`` and exit status 1."""


def add_bootstrap(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server",
                   required=required, metavar="HOST:PORT[,HOST:PORT]",
                   help="The broker(s) to connect to.")
    p.add_argument("--request-timeout-ms", type=int, default=30000,
                   help="Per-request timeout (default 30000).")
    p.add_argument("--command-config", metavar="FILE",
                   help="Client properties as Kafka's tools take them: security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.location, ssl.keystore.location (PEM) ...")


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def security_kwargs(args: argparse.Namespace) -> dict[str, object]:
    """kafka-python client settings from ``--command-config`` (Kafka's client property names)."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        text = open(path).read()
    except OSError as e:
        raise ToolError(f"cannot read --command-config {path}: {e}") from e
    props: dict[str, str] = {}
    for line in text.replace("\\\n", "").splitlines():
        line = line.strip()
        if line and line[0] not in "#!" and "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    out: dict[str, object] = {}
    if "security.protocol" in props:
        out["security_protocol"] = props["security.protocol"].upper()
    if "sasl.mechanism" in props:
        out["sasl_mechanism"] = props["sasl.mechanism"].upper()
    if "sasl.jaas.config" in props:
        opts = {m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
                for m in _JAAS_OPTION.finditer(props["sasl.jaas.config"])}
        if "username" in opts:
            out["sasl_plain_username"] = opts["username"]
        if "password" in opts:
            out["sasl_plain_password"] = opts["password"]
    for kind in ("truststore", "keystore"):
        if props.get(f"ssl.{kind}.type", "PEM").upper() != "PEM" and f"ssl.{kind}.location" in props:
            raise ToolError(f"ssl.{kind}.type {props[f'ssl.{kind}.type']}: only PEM files are supported here")
    if "ssl.truststore.location" in props:
        out["ssl_cafile"] = props["ssl.truststore.location"]
    if "ssl.keystore.location" in props:  # a PEM keystore holds the key and the certificate chain
        out["ssl_certfile"] = out["ssl_keyfile"] = props["ssl.keystore.location"]
    if props.get("ssl.key.password"):
        out["ssl_password"] = props["ssl.key.password"]
    if "ssl.endpoint.identification.algorithm" in props and not props["ssl.endpoint.identification.algorithm"]:
        out["ssl_check_hostname"] = False
    return out


def add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="Print machine-readable JSON instead of tables.")
    p.add_argument("--debug", action="store_true", help="Log client activity and print tracebacks.")


def parse_properties(items: Sequence[str] | None) -> dict[str, str]:
    """``--property k=v`` (repeatable; also accepts ``k=v,k2=v2`` like Kafka's --producer-property)."""
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise ToolError(f"Invalid property {item!r}: expected key=value")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def bootstrap_list(args: argparse.Namespace) -> list[str]:
    return [s.strip() for s in args.bootstrap_server.split(",") if s.strip()]


def admin_client(args: argparse.Namespace) -> KafkaAdminClient:
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_list(args), client_id=CLIENT_ID,
                                 request_timeout_ms=args.request_timeout_ms,
                                 bootstrap_timeout_ms=min(args.request_timeout_ms, 15000), **security_kwargs(args))
    except Exception as e:  # KafkaTimeoutError / NoBrokersAvailable: say which broker
        raise ToolError(f"cannot reach broker at {args.bootstrap_server}: {e}") from e
    _fail_over_any_node_requests(admin)
    return admin


def _fail_over_any_node_requests(admin: KafkaAdminClient) -> None:
    """Requests for "any broker" try the next broker when the chosen one cannot be reached.

    kafka-python sends them (Metadata, DescribeCluster, ...) to a random broker of the last
    Metadata and gives up if it is down. In a cluster that is exactly when an operator runs
    ``topics --describe --under-replicated-partitions``: a crashed broker stays in Metadata
    until its ZooKeeper session expires. Kafka's AdminClient retries on another node; so do we,
    once per broker. Requests to a given node (the controller, a coordinator) are unchanged.
    """
    manager = admin._manager
    send_to = manager.send

    async def send(request: ApiMessage, node_id: int | None = None, request_timeout_ms: int | None = None,
                   ) -> ApiMessage:
        if node_id is not None:
            return await send_to(request, node_id=node_id, request_timeout_ms=request_timeout_ms)
        attempts = max(1, len(manager.cluster.brokers()))
        for attempt in range(attempts):
            node = manager.least_loaded_node()
            try:
                return await send_to(request, node_id=node, request_timeout_ms=request_timeout_ms)
            except (KafkaConnectionError, NodeNotReadyError):
                if attempt + 1 >= attempts:
                    raise
        raise AssertionError("unreachable")

    manager.send = send


def configure_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if getattr(args, "debug", False) else logging.CRITICAL
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(level)


def run(fn: Callable[[argparse.Namespace], int | None]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command body: logging setup, ToolError/KafkaError -> ``Error:`` and exit 1."""

    def wrapper(args: argparse.Namespace) -> int:
        configure_logging(args)
        try:
            rc = fn(args)
            return 0 if rc is None else rc
        except ToolError as e:
            print(f"Error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:  # `samsa ... | head`
            return 0
        except Exception as e:
            if getattr(args, "debug", False):
                raise
            if isinstance(e, KafkaError):
                print(f"Error: {type(e).__name__}: {e}", file=sys.stderr)
                return 1
            raise

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], out: TextIO | None = None) -> None:
    """Left-aligned columns separated by two spaces; None prints as '-'."""
    out = out or sys.stdout
    cells = [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    fmt = "  ".join("{:<" + str(w) + "}" for w in widths)
    print(fmt.format(*headers).rstrip(), file=out)
    for row in cells:
        print(fmt.format(*row).rstrip(), file=out)


def print_json(doc: JSON, out: TextIO | None = None) -> None:
    print(json.dumps(doc, indent=2, sort_keys=False, default=str), file=out or sys.stdout)


def error_name(code: int) -> str | None:
    """Kafka's constant name for an error code (``None`` for 0)."""
    if not code:
        return None
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


def parse_partition_list(spec: str) -> list[int]:
    """``0,1,3-5`` -> [0, 1, 3, 4, 5] (kafka-get-offsets.sh's --partitions syntax)."""
    out: list[int] = []
    for part in filter(None, (s.strip() for s in spec.split(","))):
        try:
            if "-" in part:
                lo, hi = part.split("-", 1)
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
        except ValueError as e:
            raise ToolError(f"Invalid partition list {spec!r}") from e
    return out


def topic_matcher(pattern: str | None) -> Callable[[str], bool]:
    """Kafka's --topic accepts a regular expression (full match) except on --create."""
    if pattern is None:
        return lambda name: True
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ToolError(f"Invalid topic pattern {pattern!r}: {e}") from e
    return lambda name: name == pattern or rx.fullmatch(name) is not None


def list_topic_partitions(admin: KafkaAdminClient, topics: Iterable[str] | None = None) -> dict[str, list[int]]:
    """Topic -> sorted partition ids, from a Metadata request."""
    desc = admin.describe_topics(list(topics) if topics is not None else None)
    out: dict[str, list[int]] = {}
    for t in desc:
        if t.get("error_code"):
            raise ToolError(f"topic {t.get('name')}: {error_name(t['error_code'])}")
        out[t["name"]] = sorted(p["partition_index"] for p in t["partitions"])
    return out


def send_request(admin: KafkaAdminClient, request: ApiMessage, node_id: int | None = None) -> ApiMessage:
    """Send one raw ``kafka.protocol`` request through an admin client's connections.

    kafka-python picks the highest version both sides support (from ApiVersions); the
    response object has the fields of that version.
    """

    async def _send() -> ApiMessage:
        return await admin._manager.send(request, node_id=node_id)

    return admin._manager.run(_send)


def broker_ids(admin: KafkaAdminClient) -> list[int]:
    return sorted(b.node_id for b in admin._manager.cluster.brokers())


def parse_add_config(spec: str) -> dict[str, str]:
    """Kafka's --add-config syntax: ``k1=v1,k2=[v1,v2],k3=v3`` (brackets protect commas)."""
    out: dict[str, str] = {}
    i, n = 0, len(spec)
    while i < n:
        eq = spec.find("=", i)
        if eq < 0:
            raise ToolError(f"Invalid --add-config entry {spec[i:]!r}: expected key=value")
        key = spec[i:eq].strip()
        j = eq + 1
        if j < n and spec[j] == "[":
            close = spec.find("]", j)
            if close < 0:
                raise ToolError(f"Unbalanced '[' in --add-config value for {key}")
            value = spec[j + 1:close]
            j = close + 1
            if j < n and spec[j] != ",":
                raise ToolError(f"Expected ',' after ']' in --add-config at {spec[j:]!r}")
        else:
            comma = spec.find(",", j)
            comma = n if comma < 0 else comma
            value = spec[j:comma]
            j = comma
        if not key:
            raise ToolError("Empty config name in --add-config")
        out[key] = value
        i = j + 1
    return out
