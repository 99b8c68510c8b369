"""The resource verbs, dispatched to the API server (writes) or the store (reads)."""

from __future__ import annotations

from typing import Any

from sandbox import errors, strict
from sandbox.api.context import is_true
from sandbox.api.listwatch import Watches
from sandbox.api.reviews import AccessReviews
from sandbox.apicommon import PATCH_APPLY, PATCH_APPLY_CBOR
from sandbox.errors import ApiError
from sandbox.kinds import (
    Kind,
)
from sandbox.rbac import Attributes, Policy, User
from sandbox.store import obj_key


class Verbs(Watches, AccessReviews):
    """Authorization and the verbs: get, list, watch, create, update, patch, delete, deletecollection."""

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
            "GET": "get" if name else ("watch" if is_true(query.get("watch")) else "list"),
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
        validation = strict.field_validation(query) if verb in ("create", "update", "patch") else strict.IGNORE
        if verb == "get":
            obj = self.api.store.must_get(kind, namespace, name)
            self._send_object(kind, obj, 200)
        elif verb == "list":
            self._list(kind, namespace, query)
        elif verb == "watch":
            self._watch(kind, namespace, query)
        elif verb == "create":
            body = self._json_body(self._body())
            result = server.create(
                kind,
                namespace,
                body,
                manager=manager,
                dry_run=dry_run,
                field_validation=validation,
                duplicates=self.body_duplicates,
            )
            self._send_object(kind, result.obj, 201, result.warnings)
        elif verb == "update":
            body = self._json_body(self._body())
            result = server.update(
                kind,
                namespace,
                name,
                body,
                manager=manager,
                subresource=subresource,
                dry_run=dry_run,
                field_validation=validation,
                duplicates=self.body_duplicates,
            )
            self._send_object(kind, result.obj, 200, result.warnings)
        elif verb == "patch":
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            raw = self._body()
            self.body_duplicates = []
            if content_type in (PATCH_APPLY, PATCH_APPLY_CBOR):
                patch_body: Any = raw
                if content_type == PATCH_APPLY_CBOR:
                    raise errors.unsupported_media_type(content_type)
            else:
                patch_body = self._json_body(raw)
            force = is_true(query.get("force"))
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
                field_validation=validation,
                duplicates=self.body_duplicates,
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
