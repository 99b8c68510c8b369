"""The API server's write path, shared by the HTTP layer and the simulated controllers.

Create / update / patch / apply / delete with Kubernetes' rules: server-set metadata, resourceVersion
preconditions (409), generation bumped on spec changes only, the status subresource, finalizers and
deletionTimestamp, defaulting and schema validation per kind (422), validating admission webhooks
(denials and warnings), managedFields and dry-run.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from sandbox import errors
from sandbox.errors import ApiError
from sandbox.fields import record_update, server_side_apply
from sandbox.kinds import NAMESPACES, Kind
from sandbox.patch import json_patch, merge_patch, strategic_merge_patch
from sandbox.store import Obj, Store, clone

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)

PATCH_MERGE = "application/merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_APPLY_CBOR = "application/apply-patch+cbor"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Result:
    obj: Obj
    warnings: list[str] = field(default_factory=list)
    created: bool = False


# (kind, operation CREATE|UPDATE, new object, old object or None) -> warnings; raise ApiError to deny.
Admission = Callable[[Kind, str, Obj, "Obj | None"], list[str]]
Defaulter = Callable[[Obj], None]
# (new object, old object or None) -> list of causes {field, message, reason}
Validator = Callable[[Obj, "Obj | None"], list[dict[str, str]]]


def _spec_part(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _comparable(obj: Obj) -> Obj:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    return dict(obj, metadata=meta)


class ApiServer:
    """The stateful rules of kube-apiserver on top of `Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.defaulters: dict[str, Defaulter] = {}
        self.validators: dict[str, Validator] = {}
        self.admission: list[Admission] = []

    # -- helpers ---------------------------------------------------------------------------------
    def _check_name(self, kind: Kind, name: str) -> None:
        if kind is NAMESPACES:
            ok, msg, limit = DNS_LABEL.fullmatch(name), LABEL_MSG, 63
        else:
            ok, msg, limit = DNS_SUBDOMAIN.fullmatch(name), SUBDOMAIN_MSG, 253
        if not ok or len(name) > limit:
            if len(name) > limit:
                msg = f"must be no more than {limit} characters"
            raise errors.invalid(
                kind,
                name,
                [
                    {
                        "field": "metadata.name",
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{name}": {msg}',
                    }
                ],
            )

    def _check_namespace(self, kind: Kind, namespace: str, name: str) -> None:
        if not kind.namespaced:
            return
        ns = self.store.get(NAMESPACES, "", namespace)
        if ns is None:
            raise errors.not_found(NAMESPACES, namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f'{kind.qualified} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                f"because it is being terminated",
                {
                    "name": name,
                    "group": kind.group,
                    "kind": kind.plural,
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def _type_meta(self, kind: Kind, obj: Obj) -> None:
        api_version, body_kind = obj.get("apiVersion"), obj.get("kind")
        if body_kind and body_kind != kind.kind:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({kind.api_version})"
                if api_version != kind.api_version
                else f"the kind in the data ({body_kind}) does not match the expected kind ({kind.kind})"
            )
        if api_version and api_version != kind.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({kind.api_version})"
            )
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind

    def _validate(self, kind: Kind, obj: Obj, old: Obj | None) -> None:
        validator = self.validators.get(kind.key)
        if validator:
            causes = validator(obj, old)
            if causes:
                raise errors.invalid(kind, obj["metadata"]["name"], causes)

    def _admit(self, kind: Kind, op: str, obj: Obj, old: Obj | None) -> list[str]:
        warnings: list[str] = []
        for hook in self.admission:
            warnings += hook(kind, op, obj, old)
        return warnings

    # -- create ----------------------------------------------------------------------------------
    def create(
        self,
        kind: Kind,
        namespace: str,
        body: Obj,
        *,
        manager: str,
        dry_run: bool = False,
        operation: str = "Update",
        managed: list[Any] | None = None,
    ) -> Result:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        obj = clone(body)
        self._type_meta(kind, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if kind.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_ns or ""
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(5))
            meta["name"] = meta["generateName"] + suffix
        name = meta.get("name") or ""
        if not name:
            raise errors.invalid(
                kind,
                "",
                [
                    {
                        "field": "metadata.name",
                        "reason": "FieldValueRequired",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )
        self._check_name(kind, name)
        for key in SERVER_META:
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        if kind.generation:
            meta["generation"] = 1
        if kind.status_subresource and kind.custom:
            obj.pop("status", None)
        if kind is NAMESPACES:
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        with self.store.lock:
            self._check_namespace(kind, namespace, name)
            if kind.key in self.defaulters:
                self.defaulters[kind.key](obj)
            self._validate(kind, obj, None)
            warnings = self._admit(kind, "CREATE", obj, None)
            if managed is not None:
                meta["managedFields"] = managed
            elif manager:
                record_update(None, obj, kind, manager, now_iso(), operation=operation)
            if dry_run:
                if self.store.get(kind, namespace, name) is not None:
                    raise errors.already_exists(kind, name)
                return Result(obj, warnings, created=True)
            return Result(self.store.create(kind, obj), warnings, created=True)

    # -- update ----------------------------------------------------------------------------------
    def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Obj,
        *,
        manager: str,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Result:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        new = clone(body)
        self._type_meta(kind, new)
        meta = new.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if kind.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        with self.store.lock:
            current = self.store.must_get(kind, namespace, name)
            rv = meta.get("resourceVersion")
            if not rv and kind.custom:
                raise errors.invalid(
                    kind,
                    name,
                    [
                        {
                            "field": "metadata.resourceVersion",
                            "reason": "FieldValueInvalid",
                            "message": "Invalid value: 0x0: must be specified for an update",
                        }
                    ],
                )
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            return self._write(kind, current, new, manager=manager, subresource=subresource, dry_run=dry_run)

    def _write(
        self,
        kind: Kind,
        current: Obj,
        new: Obj,
        *,
        manager: str,
        subresource: str,
        dry_run: bool,
        operation: str = "Update",
        managed_done: bool = False,
    ) -> Result:
        """Finish an update of `current` into `new` (caller holds the store lock)."""
        name = current["metadata"]["name"]
        meta = new.setdefault("metadata", {})
        old_meta = current["metadata"]
        if subresource == "status":
            status = new.get("status")
            managed = meta.get("managedFields")
            new = clone(current)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            if managed_done:
                new["metadata"]["managedFields"] = managed
            meta = new["metadata"]
        elif kind.status_subresource:
            if "status" in current:
                new["status"] = clone(current["status"])
            else:
                new.pop("status", None)
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
            "generation",
        ):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if not managed_done:
            given = meta.get("managedFields")
            # A request that sets managedFields explicitly replaces them (kubectl's client-side to
            # server-side apply migration relies on this); otherwise the stored ones carry over.
            if not (isinstance(given, list) and given and given != old_meta.get("managedFields")):
                meta["managedFields"] = clone(old_meta.get("managedFields") or [])
        if kind is NAMESPACES:
            new["spec"] = clone(current.get("spec") or {})
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            if subresource != "status":
                new["status"] = clone(current.get("status") or {})
        if old_meta.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])]
            if added:
                listing = ", ".join(f'"{f}"' for f in added)
                raise errors.invalid(
                    kind,
                    name,
                    [
                        {
                            "field": "metadata.finalizers",
                            "reason": "FieldValueForbidden",
                            "message": f"Forbidden: no new finalizers can be added if the object is being deleted, "
                            f"found new finalizers []string{{{listing}}}",
                        }
                    ],
                )
        if subresource != "status" and kind.key in self.defaulters:
            self.defaulters[kind.key](new)
        if kind.generation and _spec_part(new) != _spec_part(current):
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        warnings: list[str] = []
        if subresource != "status":
            self._validate(kind, new, current)
            warnings = self._admit(kind, "UPDATE", new, current)
        if _comparable(new) == _comparable(current):
            return Result(current, warnings)
        if manager and not managed_done:
            record_update(current, new, kind, manager, now_iso(), subresource=subresource, operation=operation)
        if not meta.get("managedFields"):
            meta.pop("managedFields", None)
        if dry_run:
            meta["resourceVersion"] = old_meta["resourceVersion"]
            return Result(new, warnings)
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and kind is not NAMESPACES:
            meta.pop("finalizers", None)
            return Result(self.store.remove(kind, meta.get("namespace", ""), name), warnings)
        return Result(self.store.replace(kind, new, old_meta["resourceVersion"]), warnings)

    # -- patch -----------------------------------------------------------------------------------
    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        patch_type: str,
        body: bytes | Any,
        *,
        manager: str,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
    ) -> Result:
        if patch_type in (PATCH_APPLY, PATCH_APPLY_CBOR):
            return self.apply(
                kind, namespace, name, body, manager=manager, subresource=subresource, force=force, dry_run=dry_run
            )
        if patch_type == PATCH_STRATEGIC and kind.custom:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{PATCH_JSON}, {PATCH_MERGE}, {PATCH_APPLY}, {PATCH_APPLY_CBOR}",
            )
        if patch_type not in (PATCH_MERGE, PATCH_JSON, PATCH_STRATEGIC):
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{PATCH_JSON}, {PATCH_MERGE}, {PATCH_APPLY}, {PATCH_APPLY_CBOR}",
            )
        with self.store.lock:
            current = self.store.must_get(kind, namespace, name)
            doc = clone(current)
            if patch_type == PATCH_JSON:
                patched = json_patch(doc, body)
            elif patch_type == PATCH_MERGE:
                if not isinstance(body, dict):
                    raise errors.bad_request("merge patch must be a JSON object")
                patched = merge_patch(doc, body)
            else:
                if not isinstance(body, dict):
                    raise errors.bad_request("strategic merge patch must be a JSON object")
                patched = strategic_merge_patch(doc, body)
            if not isinstance(patched, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            meta = patched.setdefault("metadata", {})
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            if meta.get("name") != name:
                raise errors.invalid(
                    kind,
                    name,
                    [
                        {
                            "field": "metadata.name",
                            "reason": "FieldValueInvalid",
                            "message": "Invalid value: the name cannot be changed",
                        }
                    ],
                )
            self._type_meta(kind, patched)
            return self._write(kind, current, patched, manager=manager, subresource=subresource, dry_run=dry_run)

    def apply(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: bytes | Any,
        *,
        manager: str,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
    ) -> Result:
        if not manager:
            raise errors.bad_request("PATCH requests must have fieldManager specified for apply patches")
        if isinstance(body, (bytes, str)):
            try:
                applied = yaml.safe_load(body)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"error decoding YAML: {exc}") from None
        else:
            applied = body
        if not isinstance(applied, dict):
            raise errors.bad_request("the applied configuration must be an object")
        meta = applied.get("metadata") or {}
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise errors.bad_request("invalid object type: apiVersion and kind must be set")
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        with self.store.lock:
            current = self.store.get(kind, namespace, name)
            if current is None:
                if subresource:
                    raise errors.not_found(kind, name)
                merged = server_side_apply(None, applied, kind, manager, force, now_iso())
                merged.setdefault("metadata", {})
                merged["metadata"]["name"] = name
                if kind.namespaced:
                    merged["metadata"]["namespace"] = namespace
                managed = merged["metadata"].pop("managedFields")
                return self.create(kind, namespace, merged, manager=manager, dry_run=dry_run, managed=managed)
            self._type_meta(kind, dict(applied))
            merged = server_side_apply(current, applied, kind, manager, force, now_iso(), subresource=subresource)
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            merged["apiVersion"], merged["kind"] = kind.api_version, kind.kind
            return self._write(
                kind,
                current,
                merged,
                manager=manager,
                subresource=subresource,
                dry_run=dry_run,
                operation="Apply",
                managed_done=True,
            )

    # -- delete ----------------------------------------------------------------------------------
    def delete(
        self, kind: Kind, namespace: str, name: str, *, options: Obj | None = None, dry_run: bool = False
    ) -> Result:
        options = options or {}
        with self.store.lock:
            current = self.store.must_get(kind, namespace, name)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != current["metadata"].get("uid"):
                raise errors.conflict(
                    kind,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in "
                    f"object meta: {current['metadata'].get('uid')}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise errors.conflict(
                    kind,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{current['metadata']['resourceVersion']}",
                )
            finalizers = current["metadata"].get("finalizers") or []
            if kind is NAMESPACES or finalizers:
                if current["metadata"].get("deletionTimestamp"):
                    return Result(current)
                new = clone(current)
                new["metadata"]["deletionTimestamp"] = now_iso()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if kind is NAMESPACES:
                    new["status"] = dict(new.get("status") or {}, phase="Terminating")
                if dry_run:
                    return Result(new)
                return Result(self.store.replace(kind, new, current["metadata"]["resourceVersion"]))
            if dry_run:
                return Result(current)
            return Result(self.store.remove(kind, namespace, name))

    def finalize_namespace(self, name: str) -> None:
        """The namespace controller's last step: drop the `kubernetes` finalizer and the namespace."""
        with self.store.lock:
            current = self.store.get(NAMESPACES, "", name)
            if (
                current is not None
                and current["metadata"].get("deletionTimestamp")
                and not current["metadata"].get("finalizers")
            ):
                self.store.remove(NAMESPACES, "", name)
