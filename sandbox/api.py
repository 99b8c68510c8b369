"""HTTP front end: routing, discovery, authn/authz, list/watch, tables, Status bodies and faults.

Built on the standard library's ThreadingHTTPServer (HTTP/1.1 keep-alive; watches use chunked encoding).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from sandbox import errors
from sandbox.apiserver import PATCH_APPLY, PATCH_APPLY_CBOR, ApiServer
from sandbox.errors import ApiError
from sandbox.kinds import (
    BY_KEY,
    NAMESPACES,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
    Column,
    Kind,
    group_versions,
    lookup,
)
from sandbox.protobuf import CONTENT_TYPE as PROTOBUF
from sandbox.protobuf import decode_access_review
from sandbox.rbac import Attributes, Policy, User
from sandbox.store import Obj, Store, Watcher, obj_key

if TYPE_CHECKING:
    from sandbox.faults import Faults

SERVER_VERSION = {
    "major": "1",
    "minor": "35",
    "gitVersion": "v1.35.2-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
    "emulationMajor": "1",
    "emulationMinor": "35",
}
TRUE_VALUES = ("1", "t", "T", "true", "TRUE", "True")


def _bool(value: str | None) -> bool:
    return value in TRUE_VALUES


# -- selectors -------------------------------------------------------------------------------------
def compile_label_selector(text: str) -> Callable[[Obj], bool]:
    if not text:
        return lambda obj: True
    from offloading.liqo.selectors.parse import parse_requirements
    from offloading.liqo.selectors.requirements import SelectorError

    try:
        requirements = parse_requirements(text)
    except SelectorError as err:
        raise errors.bad_request(f"unable to parse requirement: {err}") from None

    def predicate(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return predicate


def field_value(obj: Obj, path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if node is None:
        return "false" if path == "spec.unschedulable" else ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def compile_field_selector(kind: Kind, text: str) -> Callable[[Obj], bool]:
    if not text:
        return lambda obj: True
    requirements: list[tuple[str, str, str]] = []
    for clause in text.split(","):
        clause = clause.strip()
        if not clause:
            continue
        for op in ("!=", "==", "="):
            if op in clause:
                key, value = clause.split(op, 1)
                requirements.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{clause}'")
    allowed = kind.allowed_field_selectors()
    for key, _, _ in requirements:
        if key not in allowed:
            raise errors.bad_request(f"field label not supported: {key}")

    def predicate(obj: Obj) -> bool:
        for key, op, value in requirements:
            actual = field_value(obj, key)
            if (actual == value) != (op == "="):
                return False
        return True

    return predicate


# -- continue tokens -------------------------------------------------------------------------------
def encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
        raise errors.bad_request("continue key is not valid: illegal base64 data or incorrect format") from None


# -- tables ----------------------------------------------------------------------------------------
def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery duration.HumanDuration."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _since(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = dt.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((dt.datetime.now(dt.UTC) - then).total_seconds())


def _cell(obj: Obj, column: Column) -> Any:
    path = column.path
    if path == "@age":
        return _since((obj.get("metadata") or {}).get("creationTimestamp"))
    status = obj.get("status") or {}
    if path == "@node_status":
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        text = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
        if (obj.get("spec") or {}).get("unschedulable"):
            text += ",SchedulingDisabled"
        return text
    if path == "@node_roles":
        labels = (obj.get("metadata") or {}).get("labels") or {}
        roles = sorted(
            {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
            | ({labels["kubernetes.io/role"]} if "kubernetes.io/role" in labels else set())
        )
        return ",".join(r for r in roles if r) or "<none>"
    if path == "@node_ip":
        return next(
            (a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), "<none>"
        )
    if path == "@pod_ready":
        statuses = status.get("containerStatuses") or []
        total = len((obj.get("spec") or {}).get("containers") or [])
        return f"{sum(1 for c in statuses if c.get('ready'))}/{total}"
    if path == "@pod_restarts":
        return sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or [])
    if path == "@event_last_seen":
        return _since(
            obj.get("lastTimestamp") or obj.get("eventTime") or (obj.get("metadata") or {}).get("creationTimestamp")
        )
    if path == "@event_object":
        inv = obj.get("involvedObject") or {}
        return f"{(inv.get('kind') or '').lower()}/{inv.get('name', '')}"
    if path.startswith("@vn_condition_"):
        ctype = path[len("@vn_condition_") :]
        return next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == ctype), None)
    value = field_value(obj, path) if not isinstance(_raw(obj, path), (int, bool)) else _raw(obj, path)
    return value if value != "" else None


def _raw(obj: Obj, path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def table(kind: Kind, objs: Iterable[Obj], list_meta: dict[str, Any], include: str) -> dict[str, Any]:
    columns = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "priority": 0,
            "description": "Name must be unique within a namespace.",
        }
    ]
    columns += [
        {"name": c.name, "type": c.type, "format": "", "description": c.description or c.name, "priority": c.priority}
        for c in kind.columns
    ]
    rows = []
    for obj in objs:
        row: dict[str, Any] = {"cells": [obj["metadata"]["name"]] + [_cell(obj, c) for c in kind.columns]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {},
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    }


# -- discovery -------------------------------------------------------------------------------------
def resource_list(group: str, version: str) -> dict[str, Any] | None:
    gv = next((g for g in group_versions() if g.group == group and g.version == version), None)
    if gv is None:
        return None
    resources = []
    for kind in gv.kinds:
        entry: dict[str, Any] = {
            "name": kind.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": list(kind.verbs),
        }
        if kind.short_names:
            entry["shortNames"] = list(kind.short_names)
        if kind.categories:
            entry["categories"] = list(kind.categories)
        resources.append(entry)
        if kind.status_subresource:
            resources.append(
                {
                    "name": kind.plural + "/status",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def group_list() -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for gv in group_versions():
        if gv.group:
            groups.setdefault(gv.group, []).append(gv.version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in groups.items()],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


# -- OpenAPI v3 (just enough for kubectl's validation to defer to the server) ---------------------------
def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_root() -> dict[str, Any]:
    return {
        "paths": {
            _gv_path(gv.group, gv.version): {
                "serverRelativeURL": f"/openapi/v3/{_gv_path(gv.group, gv.version)}?hash=sandbox"
            }
            for gv in group_versions()
        }
    }


def openapi_group_version(gv_path: str) -> dict[str, Any] | None:
    """Paths with their operations' group/version/kind and the fieldValidation parameter: kubectl then
    validates server-side (fieldValidation=Strict) instead of needing full schemas. There are no schemas."""
    gv = next((g for g in group_versions() if _gv_path(g.group, g.version) == gv_path), None)
    if gv is None:
        return None
    param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
    paths: dict[str, Any] = {}
    for kind in gv.kinds:
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        base = "/" + gv_path + ("/namespaces/{namespace}" if kind.namespaced else "") + "/" + kind.plural
        operation = {"x-kubernetes-group-version-kind": gvk, "parameters": param, "responses": {}}
        paths[base] = {"post": operation}
        paths[base + "/{name}"] = {"put": operation, "patch": operation}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }


# -- the handler -----------------------------------------------------------------------------------
class Api:
    """Everything a request needs; one per sandbox, shared by the handler threads."""

    def __init__(
        self, store: Store, server: ApiServer, policy: Policy, faults: Faults, bookmark_interval: float = 60.0
    ) -> None:
        self.store = store
        self.server = server
        self.policy = policy
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.stopping = threading.Event()
        self.admin_hooks: dict[str, Callable[[str, Any], tuple[int, Any]]] = {}


class SandboxHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: Api) -> None:
        self.api = api
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Dropped(Exception):
    """The connection was deliberately dropped (outage / timeout faults)."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SandboxHTTPServer
    server_version = "sandbox-kube-apiserver"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    # every method goes through one dispatcher
    def do_GET(self) -> None:  # noqa: N802
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    @property
    def api(self) -> Api:
        return self.server.api

    # -- responses -------------------------------------------------------------------------------
    def _send(
        self,
        code: int,
        body: Any,
        headers: dict[str, str] | None = None,
        warnings: list[str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for warning in warnings or []:
            self.send_header("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, err: ApiError) -> None:
        headers = {"Retry-After": str(err.retry_after)} if err.retry_after else None
        self._send(err.code, err.status(), headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(length) if length else b""

    def _json_body(self, raw: bytes) -> Any:
        if not raw:
            raise errors.bad_request("the body of the request is empty")
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if content_type == PROTOBUF:
            raise errors.unsupported_media_type(content_type)
        try:
            if content_type in ("application/yaml", "application/apply-patch+yaml"):
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None

    # -- dispatch --------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        try:
            if path.startswith("/sandbox/"):
                self._admin(path, query)
                return
            self._inject_faults(path)
            user = self._authenticate()
            self._route(path, query, user)
        except _Dropped:
            self.close_connection = True
        except ApiError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # pragma: no cover - a bug in the sandbox: answer like the apiserver would
            import traceback

            traceback.print_exc()
            self._send_error(errors.internal(f"{type(exc).__name__}: {exc}"))

    def _inject_faults(self, path: str) -> None:
        latency, action = self.api.faults.decide(self.command, path)
        if latency:
            self.api.stopping.wait(latency)
        if action in ("outage", "timeout"):
            if action == "timeout":
                self.api.stopping.wait(self.api.faults.settings.timeout_seconds)
            self._body()
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            raise _Dropped()
        if action == "error":
            self._body()
            raise errors.internal("sandbox: injected fault")
        if action == "conflict":
            self._body()
            raise ApiError(
                409,
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please "
                "apply your changes to the latest version and try again (sandbox: injected fault)",
            )

    def _authenticate(self) -> User:
        user = self.api.policy.authenticate(self.headers.get("Authorization"))
        if user is None:
            self._body()
            raise errors.unauthorized()
        imp_user = self.headers.get("Impersonate-User")
        imp_groups = self.headers.get_all("Impersonate-Group") or []
        if not imp_user and not imp_groups:
            return user
        if not imp_user:
            raise errors.bad_request("requested [Impersonate-Group] without impersonating a user")
        checks = [("users", imp_user)] + [("groups", g) for g in imp_groups]
        for resource, name in checks:
            attrs = Attributes("impersonate", "", resource, "", "", name)
            if not self.api.policy.allowed(user, attrs):
                self._body()
                raise errors.forbidden(
                    f'{resource} "{name}" is forbidden: User "{user.name}" cannot impersonate '
                    f'resource "{resource}" in API group "" at the cluster scope'
                )
        groups = tuple(dict.fromkeys(tuple(imp_groups) + ("system:authenticated",)))
        return User(imp_user, groups)

    def _route(self, path: str, query: dict[str, str], user: User) -> None:
        if self.command == "GET" or self.command == "HEAD":
            static = self._static(path)
            if static is not None:
                self._send(200, static)
                return
        parsed = self._parse_resource_path(path)
        if parsed is None:
            self._body()
            raise ApiError(
                404,
                "NotFound",
                "the server could not find the requested resource",
                {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
            )
        kind, namespace, name, subresource = parsed
        self._resource(kind, namespace, name, subresource, query, user)

    def _static(self, path: str) -> Any:
        if path == "/version":
            return SERVER_VERSION
        if path in ("/healthz", "/readyz", "/livez"):
            return b"ok"
        if path == "/api":
            host = f"{self.server.server_address[0]}:{self.server.server_address[1]}"
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
            }
        if path == "/apis":
            return group_list()
        if path == "/api/v1":
            return resource_list("", "v1")
        if path == "/openapi/v3":
            return openapi_root()
        if path.startswith("/openapi/v3/"):
            return openapi_group_version(path[len("/openapi/v3/") :])
        parts = path.split("/")[1:]
        if parts[0] == "apis" and len(parts) == 2:
            listing = group_list()
            return next((g for g in listing["groups"] if g["name"] == parts[1]), None) and dict(
                next(g for g in listing["groups"] if g["name"] == parts[1]), kind="APIGroup", apiVersion="v1"
            )
        if parts[0] == "apis" and len(parts) == 3:
            return resource_list(parts[1], parts[2])
        return None

    @staticmethod
    def _parse_resource_path(path: str) -> tuple[Kind, str, str, str] | None:
        parts = path.split("/")[1:]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts and parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        kind = lookup(group, version, rest[0])
        if kind is None or (namespace and not kind.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and (subresource != "status" or not kind.status_subresource):
            return None
        return kind, namespace, name, subresource

    # -- resources -------------------------------------------------------------------------------
    def _authorize(self, user: User, verb: str, kind: Kind, namespace: str, name: str, subresource: str) -> None:
        attrs = Attributes(verb, kind.group, kind.plural, subresource, namespace, name)
        if not self.api.policy.allowed(user, attrs):
            self._body()
            raise errors.forbidden(Policy.denial(user, attrs, kind.qualified), kind, name)

    def _resource(
        self, kind: Kind, namespace: str, name: str, subresource: str, query: dict[str, str], user: User
    ) -> None:
        method = self.command
        if method == "HEAD":
            method = "GET"
        verb = {
            "GET": "get" if name else ("watch" if _bool(query.get("watch")) else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method, "")
        if not verb or verb not in kind.verbs or (method == "POST" and name):
            self._body()
            raise errors.method_not_allowed()
        self._authorize(user, verb, kind, namespace, name, subresource)
        if kind.virtual:
            self._access_review(kind, user)
            return
        dry_run = query.get("dryRun") == "All"
        if "dryRun" in query and query["dryRun"] not in ("All", ""):
            raise errors.bad_request(f'Invalid dryRun value: "{query["dryRun"]}": supported values: "All"')
        manager = query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0]
        server = self.api.server
        if verb == "get":
            obj = self.api.store.must_get(kind, namespace, name)
            self._send_object(kind, obj, 200)
        elif verb == "list":
            self._list(kind, namespace, query)
        elif verb == "watch":
            self._watch(kind, namespace, query)
        elif verb == "create":
            body = self._json_body(self._body())
            result = server.create(kind, namespace, body, manager=manager, dry_run=dry_run)
            self._send_object(kind, result.obj, 201, result.warnings)
        elif verb == "update":
            body = self._json_body(self._body())
            result = server.update(
                kind, namespace, name, body, manager=manager, subresource=subresource, dry_run=dry_run
            )
            self._send_object(kind, result.obj, 200, result.warnings)
        elif verb == "patch":
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            raw = self._body()
            if content_type in (PATCH_APPLY, PATCH_APPLY_CBOR):
                patch_body: Any = raw
                if content_type == PATCH_APPLY_CBOR:
                    raise errors.unsupported_media_type(content_type)
            else:
                patch_body = self._json_body(raw)
            force = _bool(query.get("force"))
            result = server.patch(
                kind,
                namespace,
                name,
                content_type,
                patch_body,
                manager=query.get("fieldManager") or ("" if content_type == PATCH_APPLY else manager),
                subresource=subresource,
                force=force,
                dry_run=dry_run,
            )
            self._send_object(kind, result.obj, 201 if result.created else 200, result.warnings)
        elif verb == "delete":
            raw = self._body()
            options = self._json_body(raw) if raw else {}
            result = server.delete(kind, namespace, name, options=options, dry_run=dry_run)
            self._send_object(kind, result.obj, 200, result.warnings)
        elif verb == "deletecollection":
            self._body()
            predicate = self._predicate(kind, query)
            deleted = []
            for obj in self.api.store.items(kind, namespace or None):
                if predicate(obj):
                    key = obj_key(obj)
                    try:
                        deleted.append(server.delete(kind, key[0], key[1], dry_run=dry_run).obj)
                    except ApiError as err:
                        if err.code != 404:
                            raise
            self._send(200, self._list_body(kind, deleted, {"resourceVersion": str(self.api.store.revision)}))

    def _wants_table(self) -> bool:
        return "as=Table" in (self.headers.get("Accept") or "")

    def _send_object(self, kind: Kind, obj: Obj, code: int, warnings: list[str] | None = None) -> None:
        if self._wants_table():
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            body = table(kind, [obj], meta, self._include_object())
        else:
            body = obj
        self._send(code, body, warnings=warnings)

    def _include_object(self) -> str:
        split = urlsplit(self.path)
        values = parse_qs(split.query).get("includeObject")
        return values[-1] if values else "Metadata"

    def _predicate(self, kind: Kind, query: dict[str, str]) -> Callable[[Obj], bool]:
        labels = compile_label_selector(query.get("labelSelector", ""))
        fields = compile_field_selector(kind, query.get("fieldSelector", ""))
        return lambda obj: labels(obj) and fields(obj)

    def _list_body(self, kind: Kind, items: list[Obj], meta: dict[str, Any]) -> dict[str, Any]:
        if not kind.custom:
            items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
        return {"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta, "items": items}

    def _list(self, kind: Kind, namespace: str, query: dict[str, str]) -> None:
        predicate = self._predicate(kind, query)
        has_selector = bool(query.get("labelSelector") or query.get("fieldSelector"))
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise errors.bad_request(f'invalid limit "{query.get("limit")}"') from None
        token = query.get("continue")
        store = self.api.store
        if token:
            rv, after = decode_continue(token)
            source: Iterable[Obj] = store.snapshot(kind, rv, namespace or None, after)
        else:
            rv_param = query.get("resourceVersion")
            match = query.get("resourceVersionMatch")
            with store.lock:
                rv = store.revision
                if rv_param and rv_param != "0" and match == "Exact":
                    try:
                        rv = int(rv_param)
                    except ValueError:
                        raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
                    source = store.snapshot(kind, rv, namespace or None)
                else:
                    if rv_param and rv_param != "0":
                        try:
                            int(rv_param)
                        except ValueError:
                            raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
                    source = store.items(kind, namespace or None)
        items: list[Obj] = []
        remaining = 0
        next_key = None
        for obj in source:
            if not predicate(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                if has_selector:
                    break
                continue
            items.append(obj)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if remaining:
            next_key = obj_key(items[-1])
            meta["continue"] = encode_continue(rv, next_key)
            if not has_selector:
                meta["remainingItemCount"] = remaining
        if self._wants_table():
            self._send(200, table(kind, items, meta, self._include_object()))
        else:
            self._send(200, self._list_body(kind, items, meta))

    # -- watch -----------------------------------------------------------------------------------
    def _watch(self, kind: Kind, namespace: str, query: dict[str, str]) -> None:
        predicate = self._predicate(kind, query)
        rv_param = query.get("resourceVersion") or ""
        bookmarks = _bool(query.get("allowWatchBookmarks"))
        send_initial = _bool(query.get("sendInitialEvents"))
        try:
            timeout = float(query.get("timeoutSeconds") or 1800)
        except ValueError:
            raise errors.bad_request("invalid timeoutSeconds") from None
        since = None
        if rv_param not in ("", "0"):
            try:
                since = int(rv_param)
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
        initial = since is None or send_initial
        store = self.api.store
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        watcher: Watcher | None = None
        try:
            try:
                with store.lock:
                    watcher = store.watch(kind, namespace or None, predicate, since, initial)
                    if initial and send_initial and bookmarks:
                        # queued under the lock: after the synthetic ADDED events, before any live event
                        watcher.push(("BOOKMARK-INITIAL", {"rv": store.revision}))
            except ApiError as err:
                self._chunk({"type": "ERROR", "object": err.status()})
                return
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self.api.bookmark_interval
            as_table = self._wants_table()
            while not self.api.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                item = watcher.get(min(0.25, deadline - now))
                if item is None:
                    if watcher.closed:
                        break
                    if bookmarks and time.monotonic() >= next_bookmark:
                        with store.lock:
                            pending = bool(watcher.queue)
                            current = store.revision
                        if not pending:
                            self._chunk(self._bookmark(kind, current, False))
                        next_bookmark = time.monotonic() + self.api.bookmark_interval
                    continue
                event_type, obj = item
                if event_type == "BOOKMARK-INITIAL":
                    self._chunk(self._bookmark(kind, obj["rv"], True))
                    continue
                if as_table:
                    obj = table(
                        kind, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, self._include_object()
                    )
                self._chunk({"type": event_type, "object": obj})
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return
        finally:
            if watcher is not None:
                store.unwatch(watcher)
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _bookmark(self, kind: Kind, rv: int, initial_end: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}}

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # -- access reviews --------------------------------------------------------------------------
    def _access_review(self, kind: Kind, user: User) -> None:
        raw = self._body()
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = decode_access_review(raw) if content_type == PROTOBUF else self._json_body(raw)
        spec = body.get("spec") or {}
        if kind is SUBJECT_ACCESS_REVIEWS:
            if not spec.get("user") and not spec.get("groups"):
                raise errors.invalid(
                    kind,
                    "",
                    [
                        {
                            "field": "spec.user",
                            "reason": "FieldValueInvalid",
                            "message": 'Invalid value: "": at least one of user or group must be specified',
                        }
                    ],
                )
            subject = User(spec.get("user") or "", tuple(spec.get("groups") or ()))
        else:
            subject = user
        resource = spec.get("resourceAttributes")
        non_resource = spec.get("nonResourceAttributes")
        if resource:
            attrs = Attributes(
                resource.get("verb") or "",
                resource.get("group") or "",
                resource.get("resource") or "",
                resource.get("subresource") or "",
                resource.get("namespace") or "",
                resource.get("name") or "",
            )
        elif non_resource:
            attrs = Attributes(non_resource.get("verb") or "", path=non_resource.get("path") or "")
        else:
            raise errors.invalid(
                kind,
                "",
                [
                    {
                        "field": "spec",
                        "reason": "FieldValueRequired",
                        "message": "Required value: exactly one of nonResourceAttributes or "
                        "resourceAttributes must be specified",
                    }
                ],
            )
        allowed = self.api.policy.allowed(subject, attrs)
        status: dict[str, Any] = {"allowed": allowed}
        if allowed:
            status["reason"] = "allowed by sandbox RBAC policy"
        body = dict(body, apiVersion=kind.api_version, kind=kind.kind, status=status)
        body.setdefault("metadata", {})["creationTimestamp"] = None
        self._send(201, body)

    # -- admin (not part of the Kubernetes API) --------------------------------------------------
    def _admin(self, path: str, query: dict[str, str]) -> None:
        raw = self._body()
        name = path[len("/sandbox/") :]
        hook = self.api.admin_hooks.get(name)
        if hook is None:
            self._send(
                404,
                {
                    "error": f"unknown sandbox endpoint {path}",
                    "endpoints": sorted("/sandbox/" + k for k in self.api.admin_hooks),
                },
            )
            return
        payload = None
        if raw:
            try:
                payload = json.loads(raw)
            except ValueError as exc:
                self._send(400, {"error": f"invalid JSON: {exc}"})
                return
        try:
            code, body = hook(self.command, payload)
        except ValueError as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(code, body)


__all__ = ["Api", "BY_KEY", "NAMESPACES", "SELF_SUBJECT_ACCESS_REVIEWS", "SandboxHTTPServer"]
