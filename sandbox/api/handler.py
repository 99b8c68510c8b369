"""The request handler and the HTTP server of the sandbox."""

from __future__ import annotations

import contextlib
import json
import socket
from typing import cast
from urllib.parse import parse_qs, urlsplit

from sandbox import errors
from sandbox.api.context import Api, ApiHTTPServer, Dropped
from sandbox.api.discovery import parse_resource_path, static_response
from sandbox.api.verbs import Verbs
from sandbox.errors import ApiError
from sandbox.rbac import Attributes, User


class Handler(Verbs):
    """One request: admin endpoints, faults, authentication (with impersonation), routing."""

    # every method goes through one dispatcher
    def do_GET(self) -> None:  # noqa: N802
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    # -- dispatch --------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self.client_identity = "anonymous"
        try:
            if path.startswith("/sandbox/"):
                self.client_identity = "(admin endpoints)"
                self._admin(path, query)
                return
            # Watches are long-running and not counted in flight (as with the API server's max-in-flight).
            counted = query.get("watch") not in ("1", "true")
            if counted and not self.api.faults.admit():
                self._body()
                raise errors.too_many_requests()
            try:
                self._inject_faults(path)
                user = self._authenticate()
                self._route(path, query, user)
            finally:
                if counted:
                    self.api.faults.release()
        except Dropped:
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
            raise Dropped()
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
        self.client_identity = user.name
        self.api.traffic.add(user.name, requests=1)
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
            address = cast(tuple[str, int], self.server.server_address)
            host = f"{address[0]}:{address[1]}"
            static = static_response(path, host)
            if static is not None:
                self._send(200, static)
                return
        parsed = parse_resource_path(path)
        if parsed is None:
            self._body()
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
        )
        self._resource(kind, namespace, name, subresource, query, user)

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


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _verb(method: str, name: str, query: dict[str, str]) -> str:
    """Kubernetes' name of a request's verb (as in its audit log)."""
    if method in ("GET", "HEAD"):
        if query.get("watch") in ("1", "true"):
            return "watch"
        return "get" if name else "list"
    if method == "DELETE" and not name:
        return "deletecollection"
    return _VERBS.get(method, method.lower())


class SandboxHTTPServer(ApiHTTPServer):
    def __init__(self, address: tuple[str, int], api: Api) -> None:
        super().__init__(address, api, Handler)
