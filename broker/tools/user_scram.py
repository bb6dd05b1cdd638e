"""``samsa configs --entity-type users``: SCRAM credentials, as kafka-configs.sh manages them.

``--alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'``
salts and hashes the password here (PBKDF2, a random 32-byte salt; 4096 iterations unless
given) and sends only the salted password in AlterUserScramCredentials (key 51);
``--delete-config SCRAM-SHA-512`` deletes one mechanism's credential. ``--describe`` (one user, or
every user without ``--entity-name``) prints the mechanisms and iteration counts from
DescribeUserScramCredentials (key 50). The password is never printed.
"""

from __future__ import annotations

import argparse
import os

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

from broker.security.scram import DEFAULT_ITERATIONS, MECHANISM_IDS, MECHANISM_NAMES, salted_password

from ._common import ToolError, error_name, print_json, send_request


def _parse_scram_value(key: str, value: str) -> tuple[int, str]:
    opts: dict[str, str] = {}
    for part in value.split(","):
        if "=" not in part:
            raise ToolError(f"Invalid {key} value: expected [iterations=N,password=SECRET]")
        k, v = part.split("=", 1)
        opts[k.strip()] = v
    if "password" not in opts:
        raise ToolError(f"{key} needs password=...")
    try:
        iterations = int(opts.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ToolError(f"Invalid iterations for {key}") from None
    return iterations, opts["password"]


def alter(admin: KafkaAdminClient, args: argparse.Namespace, name: str, adds: dict[str, str], deletes: list[str]) -> int:
    for key in [*adds, *deletes]:
        if key not in MECHANISM_IDS:
            raise ToolError(f"Unsupported config for users: {key} (supported: {', '.join(MECHANISM_IDS)})")
    upserts = []
    for mech, value in adds.items():
        iterations, password = _parse_scram_value(mech, value)
        salt = os.urandom(32)
        upserts.append((name, MECHANISM_IDS[mech], iterations, salt, salted_password(mech, password, salt, iterations)))
    req = AlterUserScramCredentialsRequest(deletions=[(name, MECHANISM_IDS[m]) for m in deletes], upsertions=upserts)
    resp = send_request(admin, req)
    results = [{"user": r.user, "error": error_name(r.error_code), "error_message": r.error_message}
               for r in resp.results]
    if args.json:
        print_json(results)
    else:
        for r in results:
            if r["error"]:
                print(f"Error while executing config command: {r['error']}: {r['error_message'] or ''}")
            else:
                print(f"Completed updating config for user {r['user']}.")
    return 1 if any(r["error"] for r in results) else 0


def describe(admin: KafkaAdminClient, args: argparse.Namespace, name: str | None) -> int:
    req = DescribeUserScramCredentialsRequest(users=None if name is None else [(name,)])
    resp = send_request(admin, req)
    results = [{"user": r.user, "error": error_name(r.error_code), "error_message": r.error_message,
                "credentials": [{"mechanism": MECHANISM_NAMES.get(c.mechanism, str(c.mechanism)),
                                 "iterations": c.iterations} for c in r.credential_infos]}
               for r in resp.results]
    if args.json:
        print_json(results)
        return 1 if any(r["error"] for r in results) else 0
    for r in results:
        if r["error"]:
            print(f"Error describing user {r['user']}: {r['error']}: {r['error_message'] or ''}")
            continue
        creds = ", ".join(f"{c['mechanism']}=iterations={c['iterations']}" for c in r["credentials"])
        print(f"SCRAM credential configs for user-principal '{r['user']}' are {creds}")
    return 1 if any(r["error"] for r in results) else 0
