"""ApiVersions (key 18), versions 0-4.

Built from the API registry, so what we advertise is exactly what the server dispatches.
A version above 4 never reaches this handler: the server answers it with a v0 response and
UNSUPPORTED_VERSION, as Kafka does, so the client can retry with a version we know.
v3+ (KIP-511) carries the client's software name and version, which we log at debug.

v3+ also answers with the features (KIP-584, ``broker/cluster/features.py``): the supported range of
each feature, and the finalized levels with their epoch -- ``transaction.version`` 2 tells
transactions-v2 clients (KIP-890) they may use EndTxn v5. As Kafka (KAFKA-17011), v3 leaves out
supported features whose minimum is 0, which older clients could not parse.
"""

from __future__ import annotations

import logging

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from protocol.api_keys import ApiKey

from ..cluster import features
from ..security.acl import NO_AUTHZ
from . import REGISTRY, RequestContext, api

log = logging.getLogger("samsa.request")


@api(ApiKey.API_VERSIONS, versions=(0, 4), authz=NO_AUTHZ)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.version >= 3:
        log.debug("Client %s:%d is %s %s", ctx.client_host, ctx.client_port,
                  getattr(req, "client_software_name", "?"), getattr(req, "client_software_version", "?"))
    R = ctx.response_class
    extra: dict[str, object] = {}
    if ctx.version >= 3:
        fin = features.finalized(ctx.broker)
        extra = dict(
            supported_features=[R.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                for n, (lo, hi) in sorted(features.SUPPORTED_FEATURES.items())
                                if ctx.version >= 4 or lo > 0],
            finalized_features_epoch=fin.epoch,
            finalized_features=[R.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v)
                                for n, v in sorted(fin.levels.items())])
    return R(error_code=0, throttle_time_ms=0, api_keys=[
        R.ApiVersion(api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(REGISTRY.values(), key=lambda s: s.key)], **extra)
