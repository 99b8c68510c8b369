"""Create and update with Kubernetes' rules (part of ApiServer)."""

from __future__ import annotations

import random
import string
import uuid
from typing import Any

from sandbox import errors, strict
from sandbox.apichecks import CheckedServer
from sandbox.apicommon import SERVER_META, Result, comparable, now_iso, spec_part
from sandbox.fields import record_update
from sandbox.kinds import NAMESPACES, Kind
from sandbox.store import Obj, clone


class CreatingServer(CheckedServer):
    """Create: server-set metadata, defaulting, validation, admission, managedFields, dry-run."""

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
        field_validation: str = strict.IGNORE,
        duplicates: list[str] | None = None,
    ) -> Result:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        obj = clone(body)
        self._type_meta(kind, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        decoded = self._decode(kind, obj, field_validation, duplicates)
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
            self._default(kind, obj)
            self._validate(kind, obj, None)
            warnings = decoded + self._admit(kind, "CREATE", obj, None)
            if managed is not None:
                meta["managedFields"] = managed
            elif manager:
                record_update(None, obj, kind, manager, now_iso(), operation=operation)
            if dry_run:
                if self.store.get(kind, namespace, name) is not None:
                    raise errors.already_exists(kind, name)
                return Result(obj, warnings, created=True)
            return Result(self.store.create(kind, obj), warnings, created=True)


class WritingServer(CreatingServer):
    """Update (with resourceVersion preconditions, generation on spec changes, the status subresource)."""

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
        field_validation: str = strict.IGNORE,
        duplicates: list[str] | None = None,
    ) -> Result:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        new = clone(body)
        self._type_meta(kind, new)
        meta = new.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        decoded = self._decode(kind, new, field_validation, duplicates)
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
            result = self._write(kind, current, new, manager=manager, subresource=subresource, dry_run=dry_run)
            result.warnings[:0] = decoded
            return result

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
        if subresource != "status":
            self._default(kind, new)
        elif strict.has_schema(kind):
            strict.apply_defaults(kind, new)
        if kind.generation and spec_part(new) != spec_part(current):
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        warnings: list[str] = []
        self._validate(kind, new, current)
        if subresource != "status":
            warnings = self._admit(kind, "UPDATE", new, current)
        if comparable(new) == comparable(current):
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
