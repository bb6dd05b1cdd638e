"""ApiVersions (key 18), versions 0-4.

Built from the API registry, so what we advertise is exactly what the server dispatches.
A version above 4 never reaches this handler: the server answers it with a v0 response and
UNSUPPORTED_VERSION, as Kafka does, so the client can retry with a version we know.
v3+ (KIP-511) carries the client's software name and version, which we log at debug.
"""

from __future__ import annotations

import logging
from typing import Any

from protocol.api_keys import ApiKey

from ..security.acl import NO_AUTHZ
from . import REGISTRY, RequestContext, api

log = logging.getLogger("samsa.request")


@api(ApiKey.API_VERSIONS, versions=(0, 4), authz=NO_AUTHZ)
async def handle_api_versions(ctx: RequestContext, req: Any) -> Any:
    if ctx.version >= 3:
        log.debug("Client %s:%d is %s %s", ctx.client_host, ctx.client_port,
                  getattr(req, "client_software_name", "?"), getattr(req, "client_software_version", "?"))
    R = ctx.response_class
    return R(error_code=0, throttle_time_ms=0, api_keys=[
        R.ApiVersion(api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(REGISTRY.values(), key=lambda s: s.key)])
