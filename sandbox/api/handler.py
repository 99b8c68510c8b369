"""The request handler: one per connection, each request dispatched to the admin endpoints or, past the
in-flight limit and the injected faults, authenticated and routed to discovery or a resource."""

from __future__ import annotations

import contextlib
import json
import socket
import traceback
from http.server import BaseHTTPRequestHandler
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from sandbox import errors
from sandbox.api.authn import authenticate, impersonate
from sandbox.api.context import Api, ApiHTTPServer, Dropped
from sandbox.api.discovery import parse_resource_path, static_response
from sandbox.api.request import Exchange
from sandbox.api.traffic import CountingWriter
from sandbox.api.verbs import ResourceRequest
from sandbox.errors import ApiError
from sandbox.rbac import User


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive; every method goes through one dispatcher."""

    protocol_version = "HTTP/1.1"
    server: ApiHTTPServer
    server_version = "sandbox-kube-apiserver"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # whom the bytes written are counted for (the authenticated user, before any impersonation)
        self.client_identity = "anonymous"
        self.wfile = CountingWriter(self.wfile, self.api.traffic, self)  # type: ignore[assignment]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    @property
    def api(self) -> Api:
        return self.server.api

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def _dispatch(self) -> None:
        exchange = Exchange(self)
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self.client_identity = "anonymous"
        try:
            if path.startswith("/sandbox/"):
                self.client_identity = "(admin endpoints)"
                self._admin(exchange, path)
                return
            # Watches are long-running and not counted in flight (as with the API server's max-in-flight).
            counted = query.get("watch") not in ("1", "true")
            if counted and not self.api.faults.admit():
                exchange.body()
                raise errors.too_many_requests()
            if counted:
                exchange.before_send = self.api.faults.release
            try:
                self._inject_faults(exchange, path)
                user = authenticate(self.api, exchange)
                self.client_identity = user.name
                self.api.traffic.add(user.name, requests=1)
                self._route(exchange, path, query, impersonate(self.api, exchange, user))
            finally:
                exchange.settle()  # a request answered by an error or dropped stops counting here
        except Dropped:
            self.close_connection = True
        except ApiError as err:
            exchange.send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # pragma: no cover - a bug in the sandbox: answer like the apiserver would
            traceback.print_exc()
            exchange.send_error(errors.internal(f"{type(exc).__name__}: {exc}"))

    def _inject_faults(self, exchange: Exchange, path: str) -> None:
        latency, action = self.api.faults.decide(self.command, path)
        if latency:
            self.api.stopping.wait(latency)
        if action in ("outage", "timeout"):
            if action == "timeout":
                self.api.stopping.wait(self.api.faults.settings.timeout_seconds)
            exchange.body()
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            raise Dropped()
        if action == "error":
            exchange.body()
            raise errors.internal("sandbox: injected fault")
        if action == "conflict":
            exchange.body()
            raise ApiError(
                409,
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please "
                "apply your changes to the latest version and try again (sandbox: injected fault)",
            )

    def _route(self, exchange: Exchange, path: str, query: dict[str, str], user: User) -> None:
        if self.command == "GET" or self.command == "HEAD":
            address = cast(tuple[str, int], self.server.server_address)
            static = static_response(path, f"{address[0]}:{address[1]}")
            if static is not None:
                exchange.send(200, static)
                return
        parsed = parse_resource_path(path)
        if parsed is None:
            exchange.body()
            raise ApiError(
                404,
                "NotFound",
                "the server could not find the requested resource",
                {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
            )
        kind, namespace, name, subresource = parsed
        self.api.traffic.call(
            self.client_identity,
            _verb(self.command, name, query),
            kind.plural + (f"/{subresource}" if subresource else ""),
            _acting(exchange, user),
        )
        ResourceRequest(self.api, exchange, kind, namespace, name, subresource, query, user).serve()

    # -- admin (not part of the Kubernetes API) --------------------------------------------------
    def _admin(self, exchange: Exchange, path: str) -> None:
        raw = exchange.body()
        name = path[len("/sandbox/") :]
        hook = self.api.admin_hooks.get(name)
        if hook is None:
            exchange.send(
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
                exchange.send(400, {"error": f"invalid JSON: {exc}"})
                return
        try:
            code, body = hook(self.command, payload)
        except ValueError as exc:
            exchange.send(400, {"error": str(exc)})
            return
        exchange.send(code, body)


def _acting(exchange: Exchange, user: User) -> str:
    """Whom a request impersonated, as the traffic statistics name it ("" when it acted as itself)."""
    if not exchange.headers.get("Impersonate-User"):
        return ""
    groups = [g for g in user.groups if g != "system:authenticated"]
    return f"{user.name} [{','.join(groups)}]"


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _verb(method: str, name: str, query: dict[str, str]) -> str:
    """The verb a request is counted under in the traffic statistics (as in the audit log)."""
    if method in ("GET", "HEAD"):
        if query.get("watch") in ("1", "true"):
            return "watch"
        return "get" if name else "list"
    if method == "DELETE" and not name:
        return "deletecollection"
    return _VERBS.get(method, method.lower())
