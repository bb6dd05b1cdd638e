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
from protocol.messages import encode_response_header

from ..cluster import features
from ..metrics.stats import note_errors
from ..security.acl import NO_AUTHZ
from . import REGISTRY, EncodedResponse, RequestContext, api

log = logging.getLogger("samsa.request")


# The response body, which is the same bytes for a version and a set of finalized features
# (the registry is fixed once the handlers are loaded): Kafka caches it too. By version: (the
# finalized features it was built with, or None below v3; the encoded body).
_BODIES: dict[int, tuple[object, bytes]] = {}


@api(ApiKey.API_VERSIONS, versions=(0, 4), authz=NO_AUTHZ)
async def handle_api_versions(ctx: RequestContext,
                              req: ApiVersionsRequest) -> ApiVersionsResponse | EncodedResponse:
    version = ctx.version
    fin = None
    if version >= 3:
        log.debug("Client %s:%d is %s %s", ctx.client_host, ctx.client_port,
                  getattr(req, "client_software_name", "?"), getattr(req, "client_software_version", "?"))
        fin = features.finalized(ctx.broker)
    if ctx.broker.quotas.enabled:  # the request channel may still set throttle_time_ms on the object
        return _response(ctx, fin)
    key = None if fin is None else (fin.epoch, tuple(sorted(fin.levels.items())))
    cached = _BODIES.get(version)
    if cached is None or cached[0] != key:
        body = _response(ctx, fin).encode(header=False, framed=False)
        cached = _BODIES[version] = (key, bytes(body))
    note_errors(_NO_ERROR)  # RequestMetrics ErrorsPerSec: the one top-level error_code, NONE
    frame = encode_response_header(ApiKey.API_VERSIONS, version, ctx.header.correlation_id, cached[1])
    return EncodedResponse([frame], len(frame))


_NO_ERROR = {0: 1}


def _response(ctx: RequestContext, fin: features.FinalizedFeatures | None) -> ApiVersionsResponse:
    R = ctx.response_class
    extra: dict[str, object] = {}
    if fin is not None:
        extra = dict(
            supported_features=[R.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                for n, (lo, hi) in sorted(features.SUPPORTED_FEATURES.items())
                                if ctx.version >= 4 or lo > 0],
            finalized_features_epoch=fin.epoch,
            finalized_features=[R.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v)
                                for n, v in sorted(fin.levels.items())])
    response: ApiVersionsResponse = R(error_code=0, throttle_time_ms=0, api_keys=[
        R.ApiVersion(api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(REGISTRY.values(), key=lambda s: s.key)], **extra)
    return response
