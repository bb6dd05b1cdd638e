"""UpdateFeatures (key 57), versions 0-2 (KIP-584; ``kafka-features.sh upgrade/downgrade``).

Changes the finalized level of features this broker supports (``broker/cluster/features.py``:
``transaction.version``, KIP-890). Checks, as Kafka's ``FeatureControlManager``: ALTER on the
cluster (else CLUSTER_AUTHORIZATION_FAILED for the request); an unknown feature or a level outside
the supported range is INVALID_UPDATE_VERSION, and so is a lower level without a downgrade type
(v0 ``allow_downgrade``; v1+ ``upgrade_type`` 1 upgrade, 2 safe downgrade, 3 unsafe downgrade).
Level 0 removes the feature. The request is atomic: if any update is invalid nothing changes
and the first error is also the top-level one. v1 adds ``validate_only``; v2 drops the
per-feature results.

In a cluster only the active controller serves it (NOT_CONTROLLER elsewhere; admin clients send
it there), as in Kafka's ZooKeeper mode: it writes the ``/feature`` znode conditionally on the
version it last saw (FEATURE_UPDATE_FAILED if another write came in between), and every broker's
watch picks the new levels up for its ApiVersions answers.
"""

from __future__ import annotations

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafka.protocol.api_message import ApiMessage

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..cluster import features
from ..security.acl import ALTER, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _check(name: str, level: int, upgrade_type: int, current: int) -> str | None:
    """Why this update is invalid, or None."""
    supported = features.SUPPORTED_FEATURES.get(name)
    if supported is None:
        return f"Invalid update version {level} for feature {name}. The broker does not support this feature."
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"Invalid upgrade type {upgrade_type} for feature {name}."
    lo, hi = supported
    if level != 0 and not lo <= level <= hi:
        return f"Invalid update version {level} for feature {name}. Supported levels are {lo}-{hi}."
    if level < current and upgrade_type == UPGRADE:
        return (f"Invalid update version {level} for feature {name}. Can't downgrade the version of this feature "
                f"without setting the upgrade type to either safe or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        return f"Invalid update version {level} for feature {name}. Can't downgrade to a newer version."
    return None


@api(ApiKey.UPDATE_FEATURES, versions=(0, 2), authz=(Requires(ALTER, CLUSTER, CLUSTER_DENIED, "the cluster"),))
async def handle_update_features(ctx: RequestContext, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    R = ctx.response_class
    names = [u.feature for u in req.feature_updates]

    def answer(code: ErrorCode, message: str | None, per_feature: dict[str, tuple[ErrorCode, str | None]]) -> ApiMessage:
        results = [R.UpdatableFeatureResult(feature=n, error_code=int(per_feature.get(n, (code, message))[0]),
                                            error_message=per_feature.get(n, (code, message))[1]) for n in names]
        return R(throttle_time_ms=0, error_code=int(code), error_message=message,
                 **({"results": results} if ctx.version < 2 else {}))

    if not ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        return answer(CLUSTER_DENIED, None, {})
    try:
        ctx.broker.metadata_support.require_controller()
    except KafkaError as e:
        return answer(e.code, e.message, {})
    if len(set(names)) != len(names):
        return answer(ErrorCode.INVALID_REQUEST, "The request contains multiple updates for the same feature", {})
    fin = features.finalized(ctx.broker)
    levels: dict[str, int] = {}
    per: dict[str, tuple[ErrorCode, str | None]] = {}
    first: tuple[ErrorCode, str | None] | None = None
    for u in req.feature_updates:
        upgrade_type = (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if ctx.version == 0 else u.upgrade_type
        why = _check(u.feature, u.max_version_level, upgrade_type, fin.level(u.feature))
        if why is None:
            per[u.feature] = (ErrorCode.NONE, None)
            levels[u.feature] = u.max_version_level
        else:
            per[u.feature] = (ErrorCode.INVALID_UPDATE_VERSION, why)
            first = first or per[u.feature]
    if first is not None:
        return answer(first[0], first[1], per)
    if not (ctx.version >= 1 and req.validate_only) and levels:
        try:
            await fin.update(levels)
        except Exception as e:  # a concurrent write (BadVersionError / NodeExistsError), or ZooKeeper down
            return answer(ErrorCode.FEATURE_UPDATE_FAILED, f"Could not write the finalized features: {e!r}", {})
    return answer(ErrorCode.NONE, None, per)
