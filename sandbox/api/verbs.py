"""A request on a resource: its verb, authorized against the RBAC policy, then answered by the API server
(writes), the store (get), `lists`, `watches` or `reviews`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox import errors, strict
from sandbox.api.context import Api, is_true
from sandbox.api.lists import list_body, predicate, serve_list
from sandbox.api.request import Exchange
from sandbox.api.reviews import access_review
from sandbox.api.watches import serve_watch
from sandbox.apicommon import PATCH_APPLY, PATCH_APPLY_CBOR
from sandbox.errors import ApiError
from sandbox.kinds import Kind
from sandbox.objects import obj_key
from sandbox.protobuf import CONTENT_TYPE as PROTOBUF
from sandbox.rbac import Attributes, Policy, User


def verb_of(method: str, name: str, query: dict[str, str]) -> str:
    """Kubernetes' name of a request's verb (RBAC's and the audit log's), "" for a method it has none for."""
    if method in ("GET", "HEAD"):
        if name:
            return "get"
        return "watch" if is_true(query.get("watch")) else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")


@dataclass
class ResourceRequest:
    """One request on `kind` (`name` empty for a collection), by `user`."""

    api: Api
    exchange: Exchange
    kind: Kind
    namespace: str
    name: str
    subresource: str
    query: dict[str, str]
    user: User
    # what a write takes from the query: manager, dry_run, field_validation
    options: dict[str, Any] = field(default_factory=dict)

    def serve(self) -> None:
        kind, exchange = self.kind, self.exchange
        verb = verb_of(exchange.command, self.name, self.query)
        if not verb or verb not in kind.verbs or (exchange.command == "POST" and self.name):
            exchange.body()
            raise errors.method_not_allowed()
        self._authorize(verb)
        if kind.virtual:
            access_review(self.api, exchange, kind, self.user)
            return
        self.options = {
            "manager": self.manager,
            "dry_run": _dry_run(self.query),
            "field_validation": strict.field_validation(self.query)
            if verb in ("create", "update", "patch")
            else strict.IGNORE,
        }
        handlers: dict[str, Callable[[], None]] = {
            "get": self.get,
            "list": lambda: serve_list(self.api, exchange, kind, self.namespace, self.query),
            "watch": lambda: serve_watch(self.api, exchange, kind, self.namespace, self.query),
            "create": self.create,
            "update": self.update,
            "patch": self.patch,
            "delete": self.delete,
            "deletecollection": self.deletecollection,
        }
        handlers[verb]()

    def _authorize(self, verb: str) -> None:
        kind = self.kind
        attrs = Attributes(verb, kind.group, kind.plural, self.subresource, self.namespace, self.name)
        if not self.api.policy.allowed(self.user, attrs):
            self.exchange.body()
            raise errors.forbidden(Policy.denial(self.user, attrs, kind.qualified), kind, self.name)

    @property
    def manager(self) -> str:
        """The field manager: the query's, else the client's name from its User-Agent (as kube-apiserver)."""
        return self.query.get("fieldManager") or (self.exchange.headers.get("User-Agent") or "unknown").split("/")[0]

    # -- the verbs -------------------------------------------------------------------------------
    def get(self) -> None:
        obj = self.api.store.must_get(self.kind, self.namespace, self.name)
        self.exchange.send_object(self.kind, obj, 200)

    def create(self) -> None:
        options = dict(self.options)
        body = self.exchange.json_body(self.exchange.body())
        result = self.api.server.create(self.kind, self.namespace, body, duplicates=self.exchange.duplicates, **options)
        self.exchange.send_object(self.kind, result.obj, 201, result.warnings)

    def update(self) -> None:
        options = dict(self.options)
        body = self.exchange.json_body(self.exchange.body())
        result = self.api.server.update(
            self.kind,
            self.namespace,
            self.name,
            body,
            subresource=self.subresource,
            duplicates=self.exchange.duplicates,
            **options,
        )
        self.exchange.send_object(self.kind, result.obj, 200, result.warnings)

    def patch(self) -> None:
        exchange = self.exchange
        options = dict(self.options)
        content_type = exchange.content_type()
        raw = exchange.body()
        exchange.duplicates = []
        if content_type in (PATCH_APPLY, PATCH_APPLY_CBOR, PROTOBUF):
            patch_body: Any = raw
            if content_type != PATCH_APPLY:  # a protobuf body is an object, never a patch
                raise errors.unsupported_media_type(content_type)
        else:
            patch_body = exchange.json_body(raw)
        # apply needs a fieldManager of its own: the User-Agent is no default for it
        options["manager"] = self.query.get("fieldManager") or ("" if content_type == PATCH_APPLY else self.manager)
        result = self.api.server.patch(
            self.kind,
            self.namespace,
            self.name,
            content_type,
            patch_body,
            subresource=self.subresource,
            force=is_true(self.query.get("force")),
            duplicates=exchange.duplicates,
            **options,
        )
        exchange.send_object(self.kind, result.obj, 201 if result.created else 200, result.warnings)

    def delete(self) -> None:
        dry_run = self.options["dry_run"]
        raw = self.exchange.body()
        options = self.exchange.json_body(raw) if raw else {}
        result = self.api.server.delete(self.kind, self.namespace, self.name, options=options, dry_run=dry_run)
        self.exchange.send_object(self.kind, result.obj, 200, result.warnings)

    def deletecollection(self) -> None:
        dry_run = self.options["dry_run"]
        self.exchange.body()
        matches = predicate(self.kind, self.query)
        deleted = []
        for obj in self.api.store.items(self.kind, self.namespace or None):
            if matches(obj):
                namespace, name = obj_key(obj)
                try:
                    deleted.append(self.api.server.delete(self.kind, namespace, name, dry_run=dry_run).obj)
                except ApiError as err:
                    if err.code != 404:
                        raise
        meta = {"resourceVersion": str(self.api.store.revision)}
        self.exchange.send(200, list_body(self.kind, deleted, meta))


def _dry_run(query: dict[str, str]) -> bool:
    value = query.get("dryRun")
    if value not in (None, "All", ""):
        raise errors.bad_request(f'Invalid dryRun value: "{value}": supported values: "All"')
    return value == "All"
