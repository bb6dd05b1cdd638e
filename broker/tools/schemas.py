"""``samsa schemas``: register, list, describe, check, delete and configure schemas in a Schema Registry.

Speaks Confluent's REST API v1 only (stdlib HTTP), so it works against Samsa's registry, the
standalone ``samsa schema-registry``, Confluent's registry and Karapace alike::

    samsa schemas --registry-url http://127.0.0.1:8081 register orders-value --schema-file order.avsc
    samsa schemas ... register orders-value --type PROTOBUF --schema-file order.proto \\
        --reference common.proto=common-value:1
    samsa schemas ... list [--deleted] [--prefix orders]
    samsa schemas ... describe orders-value [--version 2]      samsa schemas ... describe --id 7
    samsa schemas ... check orders-value --schema-file order-v2.avsc [--version latest]
    samsa schemas ... delete orders-value [--version 1] [--permanent]
    samsa schemas ... config [orders-value] [--set FULL_TRANSITIVE | --delete]

``--user NAME:PASSWORD`` sends HTTP Basic credentials. Registry errors are printed with
Confluent's error code (``Error: 409: Schema being registered is incompatible ...``), exit 1.
"""

from __future__ import annotations

import argparse
import base64
import json
import urllib.error
import urllib.parse
import urllib.request

from ._common import JSON, Subparsers, ToolError, print_json, print_table, run

V1 = "application/vnd.schemaregistry.v1+json"


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("schemas", help="Manage schemas in a Schema Registry (Confluent's REST API).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--registry-url", required=True, metavar="URL", help="e.g. http://127.0.0.1:8081")
    p.add_argument("--user", metavar="NAME:PASSWORD", help="HTTP Basic credentials")
    p.add_argument("--json", action="store_true", help="Print the registry's JSON answers.")
    p.add_argument("--debug", action="store_true", help="Print tracebacks.")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    r = verbs.add_parser("register", help="register a schema under a subject")
    r.add_argument("subject")
    _schema_args(r)
    r.add_argument("--normalize", action="store_true")

    ls = verbs.add_parser("list", help="list subjects")
    ls.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    ls.add_argument("--prefix", default="", help="only subjects starting with this")

    d = verbs.add_parser("describe", help="show a subject's versions, one version, or a schema id")
    d.add_argument("subject", nargs="?")
    d.add_argument("--version", help="a version number or 'latest'")
    d.add_argument("--id", type=int, help="a schema id instead of a subject")

    c = verbs.add_parser("check", help="is a schema compatible with a subject's versions?")
    c.add_argument("subject")
    _schema_args(c)
    c.add_argument("--version", help="check against this version only (default: as the subject's level says)")

    rm = verbs.add_parser("delete", help="delete a subject or one version (soft, then --permanent)")
    rm.add_argument("subject")
    rm.add_argument("--version")
    rm.add_argument("--permanent", action="store_true")

    cf = verbs.add_parser("config", help="show or set the compatibility level (global or a subject's)")
    cf.add_argument("subject", nargs="?")
    group = cf.add_mutually_exclusive_group()
    group.add_argument("--set", metavar="LEVEL", help="NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, ... ")
    group.add_argument("--delete", action="store_true", help="remove the subject's (or global) level")
    p.set_defaults(func=run(main))


def _schema_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--schema-file", metavar="FILE")
    src.add_argument("--schema", metavar="TEXT")
    p.add_argument("--type", default="AVRO", type=str.upper, choices=["AVRO", "JSON", "PROTOBUF"])
    p.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION")


def _body(args: argparse.Namespace) -> dict[str, JSON]:
    if args.schema_file:
        try:
            text = open(args.schema_file, encoding="utf-8").read()
        except OSError as e:
            raise ToolError(f"cannot read {args.schema_file}: {e}") from e
    else:
        text = args.schema
    body: dict[str, JSON] = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    refs = []
    for spec in args.reference:
        name, _, rest = spec.partition("=")
        subject, _, version = rest.rpartition(":")
        if not name or not subject or not version.lstrip("-").isdigit():
            raise ToolError(f"invalid --reference {spec!r}: expected NAME=SUBJECT:VERSION")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def call(args: argparse.Namespace, method: str, path: str, body: JSON = None) -> JSON:
    url = args.registry_url.rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Accept": V1})
    if data is not None:
        req.add_header("Content-Type", V1)
    if args.user:
        req.add_header("Authorization", "Basic " + base64.b64encode(args.user.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            payload = resp.read()
    except urllib.error.HTTPError as e:
        try:
            doc = json.loads(e.read())
            raise ToolError(f"{doc.get('error_code')}: {doc.get('message')}") from None
        except ValueError:
            raise ToolError(f"HTTP {e.code} from {url}") from None
    except (urllib.error.URLError, OSError) as e:
        raise ToolError(f"cannot reach the schema registry at {args.registry_url}: {e}") from None
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return payload.decode("utf-8", "replace")


def main(args: argparse.Namespace) -> int:
    verb = args.verb
    if verb == "register":
        path = f"/subjects/{_q(args.subject)}/versions" + ("?normalize=true" if args.normalize else "")
        doc = call(args, "POST", path, _body(args))
        versions = call(args, "GET", f"/subjects/{_q(args.subject)}/versions")
        if args.json:
            print_json(doc)
        else:
            print(f"Registered {args.subject}: schema id {doc['id']} (versions {versions})")
    elif verb == "list":
        query = urllib.parse.urlencode({"deleted": str(args.deleted).lower(), "subjectPrefix": args.prefix})
        subjects = call(args, "GET", f"/subjects?{query}")
        if args.json:
            print_json(subjects)
        else:
            rows = []
            for s in subjects:
                latest = call(args, "GET", f"/subjects/{_q(s)}/versions/latest?deleted={str(args.deleted).lower()}")
                rows.append((s, latest.get("version"), latest.get("id"), latest.get("schemaType", "AVRO")))
            print_table(["SUBJECT", "LATEST VERSION", "ID", "TYPE"], rows)
    elif verb == "describe":
        if args.id is not None:
            doc = call(args, "GET", f"/schemas/ids/{args.id}")
            doc["versions"] = call(args, "GET", f"/schemas/ids/{args.id}/versions")
        elif args.subject is None:
            raise ToolError("name a subject or give --id")
        elif args.version:
            doc = call(args, "GET", f"/subjects/{_q(args.subject)}/versions/{_q(args.version)}")
        else:
            versions = call(args, "GET", f"/subjects/{_q(args.subject)}/versions")
            doc = {"subject": args.subject, "versions": versions,
                   "latest": call(args, "GET", f"/subjects/{_q(args.subject)}/versions/latest")}
            level = call(args, "GET", f"/config/{_q(args.subject)}?defaultToGlobal=true")
            doc["compatibilityLevel"] = level.get("compatibilityLevel")
        print_json(doc)
    elif verb == "check":
        path = f"/compatibility/subjects/{_q(args.subject)}/versions"
        if args.version:
            path += f"/{_q(args.version)}"
        doc = call(args, "POST", path + "?verbose=true", _body(args))
        if args.json:
            print_json(doc)
        else:
            print("compatible" if doc.get("is_compatible") else "NOT compatible")
            for m in doc.get("messages") or []:
                print(f"  {m}")
        return 0 if doc.get("is_compatible") else 1
    elif verb == "delete":
        suffix = "?permanent=true" if args.permanent else ""
        if args.version:
            doc = call(args, "DELETE", f"/subjects/{_q(args.subject)}/versions/{_q(args.version)}{suffix}")
        else:
            doc = call(args, "DELETE", f"/subjects/{_q(args.subject)}{suffix}")
        if args.json:
            print_json(doc)
        else:
            print(f"Deleted {args.subject} {'permanently' if args.permanent else '(soft)'}: versions {doc}")
    elif verb == "config":
        path = "/config" + (f"/{_q(args.subject)}" if args.subject else "")
        if args.set:
            doc = call(args, "PUT", path, {"compatibility": args.set.upper()})
        elif args.delete:
            doc = call(args, "DELETE", path)
        else:
            doc = call(args, "GET", path + ("?defaultToGlobal=true" if args.subject else ""))
        if args.json:
            print_json(doc)
        else:
            level = doc.get("compatibilityLevel") or doc.get("compatibility")
            print(f"{args.subject or '(global)'}: {level}")
    return 0
