"""Create and update: a body decoded and admitted (`Admission`), shaped by the create or update strategy
(`strategy`), its managedFields recorded (`fields`), checked against the stored resourceVersion and
written to the store, or only returned under dry run."""

from __future__ import annotations

from typing import Any

from sandbox import errors, strict
from sandbox.apicommon import Result, now_iso
from sandbox.apiserver import strategy
from sandbox.apiserver.admission import Admission, check_type_meta, decode
from sandbox.apiserver.fields import ownership_changed, record_update
from sandbox.kinds import NAMESPACES, Kind
from sandbox.objects import Obj, clone
from sandbox.store import Store


class Writer:
    """Create and update on the store, through admission."""

    def __init__(self, store: Store, admission: Admission) -> None:
        self.store = store
        self.admission = admission

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
        """A new object. `managed` is managedFields already computed (server-side apply creating it)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        obj = clone(body)
        check_type_meta(kind, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        decoded = decode(kind, obj, field_validation, duplicates)
        namespace, name = strategy.prepare_create(kind, obj, namespace)
        with self.store.lock:
            strategy.check_namespace(self.store, kind, namespace, name)
            self.admission.default(kind, obj)
            self.admission.validate(kind, obj, None)
            warnings = decoded + self.admission.admit(kind, "CREATE", obj, None)
            if managed is not None:
                meta["managedFields"] = managed
            elif manager:
                record_update(None, obj, kind, manager, now_iso(), operation=operation)
            if dry_run:
                if self.store.get(kind, namespace, name) is not None:
                    raise errors.already_exists(kind, name)
                return Result(obj, warnings, created=True)
            return Result(self.store.create(kind, obj), warnings, created=True)

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
        """A PUT: the whole object, with its resourceVersion (required for custom resources)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        new = clone(body)
        check_type_meta(kind, new)
        meta = new.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        decoded = decode(kind, new, field_validation, duplicates)
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
            result = self.write(kind, current, new, manager=manager, subresource=subresource, dry_run=dry_run)
            result.warnings[:0] = decoded
            return result

    def write(
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
        """Finish an update of `current` into `new` (update, patch and apply; caller holds the store lock).
        `managed_done`: apply already computed the managedFields."""
        new = strategy.prepare_update(kind, current, new, subresource=subresource, managed_done=managed_done)
        meta, old_meta = new["metadata"], current["metadata"]
        self.admission.default(kind, new, subresource)
        strategy.bump_generation(kind, current, new)
        warnings: list[str] = []
        self.admission.validate(kind, new, current)
        if subresource != "status":
            warnings = self.admission.admit(kind, "UPDATE", new, current)
        unchanged = strategy.comparable(new) == strategy.comparable(current)
        if unchanged and not (managed_done and ownership_changed(current, new)):
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
            return Result(self.store.remove(kind, meta.get("namespace", ""), old_meta["name"]), warnings)
        return Result(self.store.replace(kind, new, old_meta["resourceVersion"]), warnings)
