"""Confluent's Schema Registry REST API v1: routes, content types and bodies.

Routes (``{s}`` a subject, ``{v}`` a version number, ``latest`` or -1, ``{id}`` a schema id)::

    GET    /                                          {}
    GET    /schemas/types                             ["JSON","PROTOBUF","AVRO"]
    GET    /schemas                                   every schema (subjectPrefix, deleted, latestOnly)
    GET    /schemas/ids/{id}                          {"schema", "schemaType"?, "references"?} (format)
    GET    /schemas/ids/{id}/schema                   the schema text alone
    GET    /schemas/ids/{id}/subjects|versions        where it is registered (deleted)
    GET    /subjects                                  subject names (subjectPrefix, deleted)
    POST   /subjects/{s}                              lookup: is this schema registered under s?
    DELETE /subjects/{s}                              soft delete; ?permanent=true after it
    GET    /subjects/{s}/versions                     [1, 2, ...] (deleted)
    POST   /subjects/{s}/versions                     register -> {"id": n} (normalize)
    GET    /subjects/{s}/versions/{v}                 {"subject","version","id","schema",...}
    GET    /subjects/{s}/versions/{v}/schema          the schema text alone
    GET    /subjects/{s}/versions/{v}/referencedby    ids of schemas referring to it
    DELETE /subjects/{s}/versions/{v}                 soft / permanent delete of one version
    POST   /compatibility/subjects/{s}/versions[/{v}] {"is_compatible": bool} (verbose)
    GET|PUT|DELETE /config[/{s}]                      compatibility level (defaultToGlobal)
    GET|PUT|DELETE /mode[/{s}]                        READWRITE, READONLY, READONLY_OVERRIDE, IMPORT

Requests may be ``application/vnd.schemaregistry.v1+json``, ``application/vnd.schemaregistry+json``,
``application/json`` or ``application/octet-stream`` (another type is a 415); responses are
``application/vnd.schemaregistry.v1+json`` unless the Accept header asks for one of the others
(an Accept that allows none of them is a 406). Errors carry Confluent's JSON body
``{"error_code": ..., "message": ...}``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from prometheus_client import CollectorRegistry, generate_latest

from . import errors
from .election import PrimaryElection
from .errors import RegistryError
from .formats import PROTOBUF
from .http import Request, Response
from .json_types import Json, JsonObject
from .metrics import RegistryMetrics
from .security import AccessGuard
from .service import Registry, parse_version
from .state import SubjectVersion

Reply: TypeAlias = "Json | Response"  # a handler's answer: a JSON body (200) or a whole response
Handler: TypeAlias = "Callable[..., Awaitable[Reply]]"
Route: TypeAlias = "tuple[Handler, str, bool]"  # handler, the operation security checks, whether it writes

log = logging.getLogger("samsa.schema_registry")

V1 = "application/vnd.schemaregistry.v1+json"
CONTENT_TYPES = (V1, "application/vnd.schemaregistry+json", "application/json", "application/octet-stream")
FORWARDED = "x-samsa-forwarded"  # a write forwarded by another node: never forwarded again
RESPONSE_TYPES = (V1, "application/vnd.schemaregistry+json", "application/json")


def _bool(query: dict[str, str], name: str, default: bool = False) -> bool:
    v = query.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("true", "1", "yes", "")


class RestApp:
    def __init__(self, registry: Registry, forwarder: PrimaryElection | None = None,
                 security: AccessGuard | None = None, metrics: RegistryMetrics | None = None) -> None:
        self.registry = registry
        self.forwarder = forwarder  # forwards writes to the primary when this node is not it
        self.security = security  # .security.RegistrySecurity: 401/403, or None (no SASL, no authorizer)
        self.metrics = metrics

    async def __call__(self, req: Request) -> Response:
        ctype = self._response_type(req)
        try:
            resp = await self._dispatch(req, ctype)
        except RegistryError as e:
            resp = Response(e.http_status, json.dumps(e.body()).encode(), ctype)
            if e.http_status == 401:
                resp.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
        if self.metrics is not None:
            self.metrics.request(req.method, resp.status)
        return resp

    @staticmethod
    def _response_type(req: Request) -> str:
        accept = req.headers.get("accept", "")
        if not accept:
            return V1
        offered = [p.split(";")[0].strip().lower() for p in accept.split(",")]
        for t in offered:
            if t in RESPONSE_TYPES:
                return t
        return V1

    async def _dispatch(self, req: Request, ctype: str) -> Response:
        accept = req.headers.get("accept", "")
        if req.segments == ["metrics"]:
            accept = ""  # a Prometheus scraper asks for its own formats
        if accept:
            offered = [p.split(";")[0].strip().lower() for p in accept.split(",")]
            if not any(t in RESPONSE_TYPES or t in ("*/*", "application/*") for t in offered):
                raise RegistryError(406, 406, "HTTP 406 Not Acceptable")
        if req.method in ("POST", "PUT"):
            ct = req.headers.get("content-type", "").split(";")[0].strip().lower()
            if ct and ct not in CONTENT_TYPES:
                raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
        route, args = self._route(req)
        if route is None:
            raise errors.not_found_path()
        handler, operation, write = route
        subject = args.get("subject")
        if req.segments and req.segments != ["metrics"]:
            await self.registry.store.wait_ready()  # reads are served once caught up with _schemas
        if self.security is not None and req.segments != ["metrics"]:
            await self.security.check(req, operation, subject)
        if write and self.forwarder is not None:
            if not self.forwarder.is_primary():
                if FORWARDED in req.headers:
                    raise errors.forwarding_error("this node is not the primary either (elections in progress)")
                req.headers[FORWARDED] = "1"
                status, body = await self.forwarder.forward(req)
                return Response(status, body, ctype)
            await self.forwarder.wait_ready_as_primary(60.0)
        out = await handler(req, **args)
        if isinstance(out, Response):
            return out
        return Response(200, json.dumps(out).encode(), ctype)

    def _route(self, req: Request) -> tuple[Route | None, dict[str, str | None]]:
        s, m = req.segments, req.method
        if m == "HEAD":
            m = "GET"
        n = len(s)
        r = self
        if n == 0:
            if m == "GET":
                return (r.root, "read", False), {}
            raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")
        if n == 1 and s[0] == "metrics" and m == "GET" and self.metrics is not None:
            return (r.prometheus, "read", False), {}
        if s[0] == "schemas":
            if n == 1 and m == "GET":
                return (r.list_schemas, "read", False), {}
            if n == 2 and s[1] == "types" and m == "GET":
                return (r.schema_types, "read", False), {}
            if n >= 3 and s[1] == "ids" and m == "GET":
                sid = s[2]
                if n == 3:
                    return (r.schema_by_id, "read", False), {"schema_id": sid}
                if n == 4 and s[3] in ("schema", "subjects", "versions"):
                    return ({"schema": r.schema_text_by_id, "subjects": r.schema_subjects,
                             "versions": r.schema_versions}[s[3]], "read", False), {"schema_id": sid}
        elif s[0] == "subjects":
            if n == 1 and m == "GET":
                return (r.list_subjects, "read", False), {}
            if n >= 2:
                subj = s[1]
                if n == 2:
                    if m == "POST":
                        return (r.lookup, "read", False), {"subject": subj}
                    if m == "DELETE":
                        return (r.delete_subject, "delete", True), {"subject": subj}
                elif s[2] == "versions":
                    if n == 3 and m == "GET":
                        return (r.list_versions, "read", False), {"subject": subj}
                    if n == 3 and m == "POST":
                        return (r.register, "write", True), {"subject": subj}
                    if n == 4 and m == "GET":
                        return (r.get_version, "read", False), {"subject": subj, "version": s[3]}
                    if n == 4 and m == "DELETE":
                        return (r.delete_version, "delete", True), {"subject": subj, "version": s[3]}
                    if n == 5 and m == "GET" and s[4] == "schema":
                        return (r.get_version_text, "read", False), {"subject": subj, "version": s[3]}
                    if n == 5 and m == "GET" and s[4] == "referencedby":
                        return (r.referenced_by, "read", False), {"subject": subj, "version": s[3]}
        elif s[0] == "compatibility" and n >= 4 and s[1] == "subjects" and s[3] == "versions" and m == "POST":
            if n == 4:
                return (r.compatibility, "read", False), {"subject": s[2], "version": None}
            if n == 5:
                return (r.compatibility, "read", False), {"subject": s[2], "version": s[4]}
        elif s[0] == "config" and n <= 2:
            opt: str | None = s[1] if n == 2 else None
            if m == "GET":
                return (r.get_config, "read_config", False), {"subject": opt}
            if m == "PUT":
                return (r.put_config, "write_config", True), {"subject": opt}
            if m == "DELETE":
                return (r.delete_config, "write_config", True), {"subject": opt}
        elif s[0] == "mode" and n <= 2:
            opt = s[1] if n == 2 else None
            if m == "GET":
                return (r.get_mode, "read_config", False), {"subject": opt}
            if m == "PUT":
                return (r.put_mode, "write_config", True), {"subject": opt}
            if m == "DELETE" and opt is not None:
                return (r.delete_mode, "write_config", True), {"subject": opt}
        elif s[0] == "contexts" and n == 1 and m == "GET":
            return (r.contexts, "read", False), {}
        if self._known_path(s):
            raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")
        return None, {}

    @staticmethod
    def _known_path(s: list[str]) -> bool:
        return bool(s) and s[0] in ("schemas", "subjects", "compatibility", "config", "mode", "contexts")

    # --- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _body(req: Request) -> JsonObject:
        if not req.body:
            raise RegistryError(422, 422, "Request body is empty")
        try:
            doc = json.loads(req.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise RegistryError(400, 400, f"Unexpected character in request body: {e}") from None
        except RecursionError:
            raise RegistryError(400, 400, "Request body is nested too deeply") from None
        if not isinstance(doc, dict):
            raise RegistryError(422, 422, "Request body must be a JSON object")
        return doc

    def _schema_doc(self, schema_id: int, fmt: str | None) -> JsonObject:
        stored = self.registry.state.schemas.get(schema_id)
        if stored is None:
            raise errors.schema_not_found(schema_id)
        doc: JsonObject = {}
        if stored.schema_type != "AVRO":
            doc["schemaType"] = stored.schema_type
        if stored.references:
            doc["references"] = [ref.to_json() for ref in stored.references]
        text = stored.schema
        if fmt == "serialized" and stored.schema_type == PROTOBUF:
            text = self.registry.parsed(stored).serialized()
        doc["schema"] = text
        return doc

    async def _readable(self, req: Request, subjects: list[str]) -> set[str]:
        return set(subjects) if self.security is None else await self.security.readable(req, subjects)

    @staticmethod
    def _schema_id(raw: str) -> int:
        if not raw.isdigit():
            raise errors.schema_not_found(raw)
        return int(raw)

    # --- handlers ---------------------------------------------------------------------------

    async def root(self, req: Request) -> Reply:
        return {}

    async def prometheus(self, req: Request) -> Reply:
        reg = CollectorRegistry(auto_describe=False)
        if self.metrics is not None:  # the route exists only with metrics
            reg.register(self.metrics)
        return Response(200, generate_latest(reg), "text/plain; version=0.0.4; charset=utf-8")

    async def contexts(self, req: Request) -> Reply:
        return ["."]

    async def schema_types(self, req: Request) -> Reply:
        return ["JSON", "PROTOBUF", "AVRO"]

    async def list_schemas(self, req: Request) -> Reply:
        st = self.registry.state
        prefix = req.query.get("subjectPrefix", "")
        deleted = _bool(req.query, "deleted")
        latest_only = _bool(req.query, "latestOnly")
        out: list[Json] = []
        names = [s for s in st.subject_names(deleted) if s.startswith(prefix)]
        readable = await self._readable(req, names)
        for subject in names:
            if subject not in readable:
                continue
            versions = st.versions(subject, deleted)
            for sv in versions[-1:] if latest_only else versions:
                out.append(self._version_doc(sv))
        return out

    def _version_doc(self, sv: SubjectVersion, fmt: str | None = None) -> JsonObject:
        doc: JsonObject = {"subject": sv.subject, "version": sv.version, "id": sv.schema_id}
        doc.update(self._schema_doc(sv.schema_id, fmt))
        return doc

    async def schema_by_id(self, req: Request, schema_id: str) -> Reply:
        return self._schema_doc(self._schema_id(schema_id), req.query.get("format"))

    async def schema_text_by_id(self, req: Request, schema_id: str) -> Reply:
        doc = self._schema_doc(self._schema_id(schema_id), req.query.get("format"))
        return Response(200, str(doc["schema"]).encode(), "application/vnd.schemaregistry.v1+json")

    async def schema_subjects(self, req: Request, schema_id: str) -> Reply:
        sid = self._schema_id(schema_id)
        if sid not in self.registry.state.schemas:
            raise errors.schema_not_found(sid)
        uses = self.registry.state.usages(sid, _bool(req.query, "deleted"))
        readable = await self._readable(req, [sv.subject for sv in uses])
        return list[Json](sorted({sv.subject for sv in uses if sv.subject in readable}))

    async def schema_versions(self, req: Request, schema_id: str) -> Reply:
        sid = self._schema_id(schema_id)
        if sid not in self.registry.state.schemas:
            raise errors.schema_not_found(sid)
        uses = self.registry.state.usages(sid, _bool(req.query, "deleted"))
        readable = await self._readable(req, [sv.subject for sv in uses])
        return [{"subject": sv.subject, "version": sv.version} for sv in uses if sv.subject in readable]

    async def list_subjects(self, req: Request) -> Reply:
        prefix = req.query.get("subjectPrefix", "")
        names = [s for s in self.registry.state.subject_names(_bool(req.query, "deleted")) if s.startswith(prefix)]
        readable = await self._readable(req, names)
        return [s for s in names if s in readable]

    async def list_versions(self, req: Request, subject: str) -> Reply:
        st = self.registry.state
        if not st.versions(subject, True):
            raise errors.subject_not_found(subject)
        versions = st.versions(subject, _bool(req.query, "deleted"))
        if not versions:
            raise errors.subject_not_found(subject)
        return [sv.version for sv in versions]

    async def get_version(self, req: Request, subject: str, version: str) -> Reply:
        sv = self.registry.get_subject_version(subject, version, _bool(req.query, "deleted"))
        return self._version_doc(sv, req.query.get("format"))

    async def get_version_text(self, req: Request, subject: str, version: str) -> Reply:
        sv = self.registry.get_subject_version(subject, version, _bool(req.query, "deleted"))
        text = self._schema_doc(sv.schema_id, req.query.get("format"))["schema"]
        return Response(200, str(text).encode(), "application/vnd.schemaregistry.v1+json")

    async def referenced_by(self, req: Request, subject: str, version: str) -> Reply:
        sv = self.registry.get_subject_version(subject, version)
        return list[Json](self.registry.state.referenced_by(subject, sv.version))

    async def register(self, req: Request, subject: str) -> Reply:
        body = self._body(req)
        out = await self.registry.register(subject, body, _bool(req.query, "normalize"))
        if self.metrics is not None:
            self.metrics.registered()
        # Confluent's RegisterSchemaResponse (its older registries answered {"id"} alone)
        return {"id": out["id"], "version": out["version"], **self._schema_doc(out["id"], None)}

    async def lookup(self, req: Request, subject: str) -> Reply:
        body = self._body(req)
        deleted = _bool(req.query, "deleted")
        reg = self.registry
        if not reg.state.versions(subject, deleted=True):
            raise errors.subject_not_found(subject)
        schema = await reg.parse_request(body, reg.normalize(subject, _bool(req.query, "normalize")))
        sv = reg._matching(subject, schema, deleted=deleted)
        if sv is None:
            raise errors.schema_not_found()
        return self._version_doc(sv, req.query.get("format"))

    async def delete_subject(self, req: Request, subject: str) -> Reply:
        return list[Json](await self.registry.delete_subject(subject, _bool(req.query, "permanent")))

    async def delete_version(self, req: Request, subject: str, version: str) -> Reply:
        if version not in ("latest",):
            parse_version(version)
        return await self.registry.delete_version(subject, version, _bool(req.query, "permanent"))

    async def compatibility(self, req: Request, subject: str, version: str | None) -> Reply:
        body = self._body(req)
        if version is not None and version != "latest":
            parse_version(version)
        return await self.registry.check_compatibility(subject, version, body, _bool(req.query, "normalize"),
                                                       _bool(req.query, "verbose"))

    async def get_config(self, req: Request, subject: str | None) -> Reply:
        st = self.registry.state
        if subject is not None and not st.has_config(subject):
            if not _bool(req.query, "defaultToGlobal"):
                raise errors.subject_config_not_found(subject)
            subject = None
        doc: dict[str, Json] = {}
        if subject is None:
            doc["compatibilityLevel"] = self.registry.compatibility_level(None)
        elif subject in st.configs:
            doc["compatibilityLevel"] = st.configs[subject]
        if subject in st.normalize:
            doc["normalize"] = st.normalize[subject]
        return doc

    async def put_config(self, req: Request, subject: str | None) -> Reply:
        body = self._body(req)
        return await self.registry.set_config(subject, body.get("compatibility", body.get("compatibilityLevel")),
                                              body.get("normalize"))

    async def delete_config(self, req: Request, subject: str | None) -> Reply:
        return {"compatibilityLevel": await self.registry.delete_config(subject)}

    async def get_mode(self, req: Request, subject: str | None) -> Reply:
        st = self.registry.state
        if subject is None:
            return {"mode": self.registry.mode(None)}
        if subject in st.modes:
            return {"mode": st.modes[subject]}
        if _bool(req.query, "defaultToGlobal"):
            return {"mode": self.registry.mode(None)}
        raise errors.subject_mode_not_found(subject)

    async def put_mode(self, req: Request, subject: str | None) -> Reply:
        body = self._body(req)
        return {"mode": await self.registry.set_mode(subject, body.get("mode"), _bool(req.query, "force"))}

    async def delete_mode(self, req: Request, subject: str) -> Reply:
        return {"mode": await self.registry.delete_mode(subject)}
