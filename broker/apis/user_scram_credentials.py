"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), version 0 (KIP-554).

Describe lists, per user, the SCRAM mechanisms and iteration counts that have credentials
(never salts or keys); ``users`` null or empty lists every user (Kafka's ScramControlManager
treats both alike, and librdkafka always sends an empty array when no user is named); an
unknown user is RESOURCE_NOT_FOUND and a user named twice DUPLICATE_RESOURCE. Alter applies deletions and upsertions; the client sends
the salt and the salted password (PBKDF2 done client side, as kafka-configs.sh does), from
which the broker derives and stores StoredKey/ServerKey. Each user succeeds or fails as a
whole, with Kafka's errors: UNSUPPORTED_SASL_MECHANISM for an unknown mechanism,
UNACCEPTABLE_CREDENTIAL for an empty name or salt or an iteration count outside 4096-16384,
RESOURCE_NOT_FOUND for deleting what does not exist, DUPLICATE_RESOURCE for altering one
credential twice in a request. Changes are persisted before the response; when they cannot be
(ZooKeeper slow or unreachable) every user of the request that passed the checks answers that
error (REQUEST_TIMED_OUT, or UNKNOWN_SERVER_ERROR with ZooKeeper's answer) and nothing changes.

Authorization: Describe needs DESCRIBE on CLUSTER, Alter needs ALTER on CLUSTER.
"""

from __future__ import annotations

from collections import Counter

from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.data_container import DataContainer

from broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    ScramCredential,
)
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import ALTER, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, DESCRIBE, Requires
from . import RequestContext, api


@api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, versions=(0, 0),
     authz=(Requires(DESCRIBE, CLUSTER, CLUSTER_DENIED, "top-level error"),))
async def handle_describe_user_scram_credentials(ctx: RequestContext, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    R = ctx.response_class
    if not ctx.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=int(CLUSTER_DENIED), error_message="Cluster authorization failed.",
                 results=[])
    store = ctx.broker.security.credentials
    users = store.users()
    names = sorted(users) if not req.users else [u.name for u in req.users]
    counts = Counter(names)
    results = []
    infos: list[DataContainer]
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            code, msg, infos = ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user " \
                "twice in a single request", []
        elif name not in users:
            code, msg, infos = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not " \
                "exist", []
        else:
            code, msg = ErrorCode.NONE, None
            infos = [R.DescribeUserScramCredentialsResult.CredentialInfo(mechanism=MECHANISM_IDS[m],
                                                                          iterations=c.iterations)
                     for m, c in sorted(users[name].items())]
        results.append(R.DescribeUserScramCredentialsResult(user=name, error_code=code, error_message=msg,
                                                             credential_infos=infos))
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)


@api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0),
     authz=(Requires(ALTER, CLUSTER, CLUSTER_DENIED, "every user"),))
async def handle_alter_user_scram_credentials(ctx: RequestContext, req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    R = ctx.response_class
    store = ctx.broker.security.credentials
    if not ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        names = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return R(throttle_time_ms=0, results=[R.AlterUserScramCredentialsResult(
            user=n, error_code=int(CLUSTER_DENIED), error_message="Cluster authorization failed.") for n in names])
    seen = Counter([(d.name, d.mechanism) for d in req.deletions] + [(u.name, u.mechanism) for u in req.upsertions])
    errors: dict[str, tuple[ErrorCode, str]] = {}

    def fail(user: str, code: ErrorCode, msg: str) -> None:
        errors.setdefault(user, (code, msg))

    for d in req.deletions:
        mech = MECHANISM_NAMES.get(d.mechanism)
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif seen[(d.name, d.mechanism)] > 1:
            fail(d.name, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        elif store.get(d.name, mech) is None:
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    for u in req.upsertions:
        mech = MECHANISM_NAMES.get(u.mechanism)
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif seen[(u.name, u.mechanism)] > 1:
            fail(u.name, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        elif u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations (minimum {MIN_ITERATIONS})")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations (maximum {MAX_ITERATIONS})")
        elif not u.salt or not u.salted_password:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    deletes = [(d.name, MECHANISM_NAMES[d.mechanism]) for d in req.deletions if d.name not in errors]
    upserts = [(u.name, MECHANISM_NAMES[u.mechanism],
                ScramCredential.from_salted_password(MECHANISM_NAMES[u.mechanism], bytes(u.salted_password),
                                                     bytes(u.salt), u.iterations))
               for u in req.upsertions if u.name not in errors]
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    if deletes or upserts:
        try:
            await store.apply(upserts, deletes)
        except KafkaError as e:
            for name in users:
                fail(name, e.code, e.message or e.code.name)
    results = []
    for name in users:
        code, msg = errors.get(name, (ErrorCode.NONE, None))  # type: ignore[assignment]
        results.append(R.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=msg))
    return R(throttle_time_ms=0, results=results)
