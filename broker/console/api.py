"""The console's routes: server-rendered pages, the JSON API under ``/api/``, static assets.

Pages (GET, HTML, :mod:`.pages`; readable without JavaScript): ``/`` (overview), ``/topics``,
``/topics/<name>``, ``/topics/<name>/messages?partition=P&offset=O|timestamp=MS&limit=N``,
``/groups``, ``/groups/<id>``, ``/transactions``, ``/security``. A page that fails (unknown
topic, unreachable cluster) is an HTML page with the reason and the matching status.

JSON reads (GET), used by scripts and tests:

- ``/api/overview``: cluster id, controller, brokers, versions, partition counts,
  under-replicated and offline counts, latest rates.
- ``/api/throughput``: the sampled history (bytes in/out and messages in per second).
- ``/api/topics``, ``/api/topics/<name>`` (partitions with leader, replicas, ISR, log start/end
  offsets; configs with their sources).
- ``/api/topics/<name>/messages?partition=P&offset=O|timestamp=MS&limit=N``: one page of records.
- ``/api/groups``, ``/api/groups/<id>`` (state, members and assignments, lag per partition,
  total, lag history).
- ``/api/transactions``: ongoing transactions and active producers.
- ``/api/schemas``, ``/api/schemas/<subject>``: the schema registry's subjects and versions.
- ``/api/security``: ACL bindings and client quotas (read-only here; ``samsa acls``-style tools change them).

Writes (POST, JSON body, only with ``console.allow.writes=true``; otherwise 403 with the
reason): ``/api/topics`` (create), ``/api/topics/<name>/partitions``,
``/api/topics/<name>/configs``, ``/api/topics/<name>/delete-records``,
``/api/groups/<id>/reset-offsets`` (a dry run unless ``"execute": true``).

A POST must be ``application/json``, which a cross-site HTML form cannot send without a CORS
preflight that this server never grants, and a request whose ``Origin`` is not this server is
refused: another web page open in the operator's browser cannot drive the writes.
"""

from __future__ import annotations

import re
from importlib import resources

from broker.tools._common import JSON

from . import pages
from .cluster import ClusterView, ConsoleError
from .http import HttpError, Request, Response, error_response, json_body, json_response
from .messages import MAX_PAGE

STATIC_TYPES = {".js": "application/javascript", ".css": "text/css",
                ".svg": "image/svg+xml"}
STATIC_NAME = re.compile(r"^[a-z0-9_-]+\.(js|css|svg)$")
READ_ONLY_MESSAGE = ("This console is read-only. Restart the broker with console.allow.writes=true "
                     "to create topics, add partitions, alter configs, reset offsets or delete records.")


def _int(req: Request, name: str, default: int | None = None, lo: int | None = None,
         hi: int | None = None) -> int | None:
    raw = req.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError as e:
        raise HttpError(400, f"{name} must be an integer") from e
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise HttpError(400, f"{name} must be between {lo} and {hi}")
    return v


def _body_int(doc: dict[str, JSON], name: str, default: int | None = None, required: bool = False) -> int | None:
    v = doc.get(name, default)
    if v is None:
        if required:
            raise HttpError(400, f"{name} is required")
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            v = int(str(v))
        except ValueError as e:
            raise HttpError(400, f"{name} must be an integer") from e
    return v


class ConsoleApp:
    """Routes requests to :class:`ClusterView` calls (run off the event loop)."""

    def __init__(self, view: ClusterView, allow_writes: bool) -> None:
        self.view = view
        self.allow_writes = allow_writes

    async def __call__(self, req: Request) -> Response:
        seg = req.segments
        if seg and seg[0] == "static" and len(seg) == 2:
            return self._static(seg[1])
        if seg == ["favicon.ico"]:
            return self._static("favicon.svg")
        if not seg or seg[0] != "api":
            return await self._page(req, seg)
        try:
            if req.method == "POST":
                return await self._write(req, seg[1:])
            if req.method not in ("GET", "HEAD"):
                raise HttpError(405, f"method {req.method} not allowed")
            return await self._read(req, seg[1:])
        except ConsoleError as e:
            return error_response(e.status, str(e))

    async def _page(self, req: Request, seg: list[str]) -> Response:
        """An HTML page, rendered on the console's worker thread (never on the broker's loop)."""
        found = pages.route(seg)
        try:
            if found is None:
                raise HttpError(404, f"No page at {req.path}.")
            if req.method not in ("GET", "HEAD"):
                raise HttpError(405, f"method {req.method} not allowed on a page; writes go to /api/")
            page, args = found
            status, body = await self.view.call(page, self.view, self.allow_writes, req.query, *args)
        except (ConsoleError, HttpError) as e:
            status, body = pages.error_page(e.status, str(e), self.allow_writes)
        return Response(status, body, "text/html")

    def _static(self, name: str) -> Response:
        if not STATIC_NAME.match(name):
            raise HttpError(404, "no such file")
        try:
            data = resources.files("broker.console").joinpath("static", name).read_bytes()
        except (FileNotFoundError, IsADirectoryError) as e:
            raise HttpError(404, "no such file") from e
        return Response(200, data, STATIC_TYPES["." + name.rsplit(".", 1)[1]])

    async def _read(self, req: Request, seg: list[str]) -> Response:
        v = self.view
        if seg == ["config"]:
            return json_response({"allow_writes": self.allow_writes, "bootstrap": v.bootstrap})
        if seg == ["overview"]:
            doc = await v.call(v.overview)
            doc["allow_writes"] = self.allow_writes
            return json_response(doc)
        if seg == ["throughput"]:
            return json_response({"history": [{k: p.get(k) for k in ("t", "bytes_in", "bytes_out", "messages_in", "source")}
                                              for p in list(v.history)]})
        if seg == ["topics"]:
            return json_response({"topics": await v.call(v.topics)})
        if len(seg) == 2 and seg[0] == "topics":
            return json_response(await v.call(v.topic, seg[1]))
        if len(seg) == 3 and seg[0] == "topics" and seg[2] == "messages":
            partition = _int(req, "partition", 0, 0, 2**31 - 1)
            offset = _int(req, "offset", None, -(2**62), 2**62)
            timestamp = _int(req, "timestamp", None, 0, 2**62)
            limit = _int(req, "limit", 50, 1, MAX_PAGE)
            return json_response(await v.call(v.browse, seg[1], partition, offset, timestamp, limit))
        if seg == ["groups"]:
            return json_response({"groups": await v.call(v.groups)})
        if len(seg) == 2 and seg[0] == "groups":
            return json_response(await v.call(v.group, seg[1]))
        if seg == ["transactions"]:
            return json_response(await v.call(v.transactions))
        if seg == ["security"]:
            return json_response(await v.call(v.security))
        if seg == ["schemas"]:
            return json_response(await v.call(v.schemas))
        if len(seg) == 2 and seg[0] == "schemas":
            return json_response(await v.call(v.subject, seg[1]))
        raise HttpError(404, f"no API at {req.path}")

    async def _write(self, req: Request, seg: list[str]) -> Response:
        origin = req.headers.get("origin")
        host = req.headers.get("host", "")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            raise HttpError(403, f"cross-origin request from {origin} refused")
        if not self.allow_writes:
            raise HttpError(403, READ_ONLY_MESSAGE)
        doc = json_body(req)
        v = self.view
        if seg == ["topics"]:
            name = str(doc.get("name") or "").strip()
            if not name:
                raise HttpError(400, "name is required")
            configs = doc.get("configs") or {}
            if not isinstance(configs, dict):
                raise HttpError(400, "configs must be an object of name: value")
            res = await v.call(v.create_topic, name, _body_int(doc, "partitions", -1),
                               _body_int(doc, "replication_factor", -1), {str(k): str(x) for k, x in configs.items()})
            return json_response(res, 201)
        if len(seg) == 3 and seg[0] == "topics" and seg[2] == "partitions":
            count = _body_int(doc, "count", required=True)
            return json_response(await v.call(v.add_partitions, seg[1], count))
        if len(seg) == 3 and seg[0] == "topics" and seg[2] == "configs":
            set_ = doc.get("set") or {}
            delete = doc.get("delete") or []
            if not isinstance(set_, dict) or not isinstance(delete, list):
                raise HttpError(400, "set must be an object and delete a list of names")
            if not set_ and not delete:
                raise HttpError(400, "nothing to change: give set and/or delete")
            return json_response(await v.call(v.alter_configs, seg[1], {str(k): str(x) for k, x in set_.items()},
                                              [str(k) for k in delete]))
        if len(seg) == 3 and seg[0] == "topics" and seg[2] == "delete-records":
            partition = _body_int(doc, "partition", required=True)
            before = _body_int(doc, "offset", required=True)
            return json_response(await v.call(v.delete_records, seg[1], partition, before))
        if len(seg) == 3 and seg[0] == "groups" and seg[2] == "reset-offsets":
            topic = str(doc.get("topic") or "")
            if not topic:
                raise HttpError(400, "topic is required")
            parts = doc.get("partitions")
            if parts is not None and (not isinstance(parts, list) or
                                      not all(isinstance(p, int) and not isinstance(p, bool) for p in parts)):
                raise HttpError(400, "partitions must be a list of integers")
            return json_response(await v.call(v.reset_offsets, seg[1], topic, parts, str(doc.get("to") or ""),
                                              _body_int(doc, "value"), bool(doc.get("execute"))))
        raise HttpError(404, f"no API at {req.path}")
