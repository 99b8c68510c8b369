"""The Kubernetes writes of one change: create, update or delete the NamespaceOffloading, idempotently and
with conflict detection by generation and uid.

One round trip per change when nothing raced it (the sandbox counts them: tests/test_bulk_throughput.py):

- create: POST; only a 409 AlreadyExists reads the object (our own earlier write, redelivered, or
  someone else's offloading: a conflict). The scheduling label, when asked for and missing from the
  snapshot, is one PATCH of the namespace before.
- update: one JSON patch whose ``test`` operations are the preconditions the requester saw (uid and
  generation: a status written by Liqo since does not matter) and which sets the spec and our
  annotations. When a test fails (422) the object is read and the old rules decide: our own write
  (redelivered), a conflict, or a spec to write again with a conditional PUT.
- delete: DELETE with the snapshot's uid and resourceVersion as preconditions; a 409 reads the object
  and decides as for an update. The wait for Liqo's finalizer reads the snapshot the watcher keeps
  (``apply.await_deletion``), not the API server, while the watcher runs.
"""

from __future__ import annotations

import logging
from typing import Any

from liqo_rules import constants as liqo
from liqo_rules.manifest import manifest
from offloading.choices import ChangeAction
from offloading.cluster import kube
from offloading.models import (
    ChangeRequest,
    Namespace,
)

log = logging.getLogger(__name__)


class Conflict(Exception):
    def __init__(self, message: str, found: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.found = found


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _written_by(obj: dict[str, Any], change: ChangeRequest) -> bool:
    return _annotations(obj).get(kube.CHANGE_ID_ANNOTATION) == str(change.pk)


def _check_base(change: ChangeRequest, current: dict[str, Any], advice: str = "") -> None:
    """Conflict when the object is not the one the requester saw: another uid (deleted and created
    again) or another generation (its spec changed)."""
    meta = current.get("metadata") or {}
    if change.base_uid and meta.get("uid") and meta["uid"] != change.base_uid:
        raise Conflict(f"The NamespaceOffloading was deleted and created again after you loaded it{advice}", current)
    if change.base_generation is not None and meta.get("generation") != change.base_generation:
        raise Conflict(
            f"The offloading changed after you loaded it (generation {change.base_generation} "
            f"became {meta.get('generation')}){advice}",
            current,
        )


def _unlabel(change: ChangeRequest) -> None:
    """Take back the scheduling label this change added (its create was refused, or it conflicts)."""
    try:
        kube.label_namespace(change.namespace, {liqo.SCHEDULING_LABEL: None})
    except kube.KubeError:
        log.warning("could not remove the scheduling label of %s after a refused create", change.namespace)


def _create(change: ChangeRequest, annotations: dict[str, str]) -> kube.Result:
    """Create the NamespaceOffloading, labelling the namespace first when asked to; a label we added
    is taken back if the create is refused, so a refused change leaves nothing behind."""
    body = manifest(change.namespace, change.desired_spec or {})
    body.pop("status", None)
    body["metadata"]["annotations"] = annotations
    body["spec"] = change.desired_spec
    added_label = False
    warnings: list[str] = []
    if change.label_namespace:
        labels = Namespace.objects.of(change.managed_id).filter(name=change.namespace).values_list("labels", flat=True)
        known = labels.first() or {}
        if known.get(liqo.SCHEDULING_LABEL) != "true":
            warnings += kube.label_namespace(change.namespace, {liqo.SCHEDULING_LABEL: "true"}).warnings
            added_label = True
    try:
        result = kube.create_offloading(change.namespace, body)
    except kube.KubeError as exc:
        if added_label and exc.kind != "exists":
            _unlabel(change)
        exc.added_label = added_label  # type: ignore[attr-defined]
        raise
    result.warnings = warnings + result.warnings
    return result


def _pointer(key: str) -> str:
    """A JSON pointer token (RFC 6901): ``~`` and ``/`` escaped."""
    return key.replace("~", "~0").replace("/", "~1")


def _patch_in_one(change: ChangeRequest, annotations: dict[str, str]) -> kube.Result | None:
    """The update as one conditional JSON patch; None when its preconditions do not hold on the object
    the API server has (or it has no annotations to add ours to): then the caller reads it and decides."""
    if change.base_generation is None:
        return None
    operations: list[dict[str, Any]] = []
    if change.base_uid:
        operations.append({"op": "test", "path": "/metadata/uid", "value": change.base_uid})
    operations.append({"op": "test", "path": "/metadata/generation", "value": change.base_generation})
    operations.append({"op": "replace", "path": "/spec", "value": change.desired_spec})
    operations += [
        {"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value}
        for key, value in annotations.items()
    ]
    try:
        return kube.patch_offloading(change.namespace, operations)
    except kube.KubeError as exc:
        if exc.kind in ("invalid", "not_found", "forbidden"):
            log.info("conditional patch of %s not applied: %s", change.namespace, exc.message)
            # A failed test (the object moved or is another one), no annotations yet, a webhook's
            # denial, gone, or a user allowed to update but not to patch (the access review asks
            # for update): the read below tells which, and the PUT after it gets the same denial.
            return None
        raise


def _create_first(
    change: ChangeRequest, annotations: dict[str, str]
) -> tuple[tuple[dict[str, Any] | None, list[str]] | None, bool]:
    """Create without reading first: (what was written, or None when it already exists and the caller
    must read it; whether the scheduling label was added for it)."""
    try:
        result = _create(change, annotations)
    except kube.KubeError as exc:
        if exc.kind == "exists":
            return None, bool(getattr(exc, "added_label", False))
        raise
    return (result.obj, result.warnings), False


def push_spec(change: ChangeRequest) -> tuple[dict[str, Any] | None, list[str]]:
    """Create or update the NamespaceOffloading; conflict if it moved since the requester saw it."""
    annotations = {kube.CHANGE_ID_ANNOTATION: str(change.pk), kube.REQUESTER_ANNOTATION: change.requester_name}
    labelled = False
    if change.action == ChangeAction.OFFLOAD:
        created, labelled = _create_first(change, annotations)
        if created is not None:
            return created
    elif change.action == ChangeAction.UPDATE:
        patched = _patch_in_one(change, annotations)
        if patched is not None:
            return patched.obj, patched.warnings
    try:
        return _push_after_reading(change, annotations)
    except Conflict:
        if labelled:
            _unlabel(change)  # someone else's offloading: the label we added for ours goes
        raise


def _push_after_reading(change: ChangeRequest, annotations: dict[str, str]) -> tuple[dict[str, Any] | None, list[str]]:
    """The write decided on the object as it is now (read first): the path when the direct write above
    met another object than the requester saw."""
    for _ in range(5):
        current = kube.get_offloading(change.namespace)
        if current is not None and _written_by(current, change):
            return current, []  # a redelivery: our earlier attempt already wrote it
        if current is None:
            if change.action == ChangeAction.UPDATE:
                raise Conflict("The NamespaceOffloading was deleted after you loaded it", None)
            try:
                result = _create(change, annotations)
            except kube.KubeError as exc:
                if exc.kind == "exists":
                    continue  # created meanwhile: look again
                raise
            return result.obj, result.warnings
        meta = current.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            raise Conflict("The NamespaceOffloading is being deleted", current)
        if change.action == ChangeAction.OFFLOAD:
            raise Conflict("The namespace was offloaded by someone else after you loaded it", current)
        _check_base(change, current)
        body = dict(current)
        body["metadata"] = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}}
        body["spec"] = change.desired_spec
        body.pop("status", None)
        try:
            result = kube.replace_offloading(change.namespace, body)
        except kube.KubeError as exc:
            if exc.kind == "conflict":
                # Usually only the status moved (Liqo writes it); the generation check above
                # decides on the next round whether the spec moved too.
                continue
            raise
        return result.obj, result.warnings
    raise kube.KubeError("transient", "the object kept changing while it was being updated")


def _gone_or_waiting(obj: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[str]]:
    """After a DELETE: the object is gone (no finalizer held it), or Liqo's finalizer holds it."""
    meta = (obj or {}).get("metadata") or {}
    if meta.get("finalizers"):
        raise Waiting()
    return None, []


def _delete_first(change: ChangeRequest) -> tuple[dict[str, Any] | None, list[str]] | None:
    """DELETE with the snapshot's uid and resourceVersion as preconditions; None when they do not hold
    (the object moved: the caller reads it and decides) or they are not known."""
    if not change.base_uid or not change.base_resource_version:
        return None
    try:
        result = kube.delete_offloading(
            change.namespace, resource_version=change.base_resource_version, uid=change.base_uid
        )
    except kube.KubeError as exc:
        if exc.kind == "not_found":
            return None, []
        if exc.kind == "conflict":
            return None
        raise
    return _gone_or_waiting(result.obj)


def push_delete(change: ChangeRequest) -> tuple[dict[str, Any] | None, list[str]]:
    deleted = _delete_first(change)
    if deleted is not None:
        return deleted
    for _ in range(5):
        current = kube.get_offloading(change.namespace)
        if current is None:
            return None, []
        meta = current.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            raise Waiting()
        _check_base(change, current, "; review it before removing it")
        try:
            kube.delete_offloading(change.namespace, resource_version=meta.get("resourceVersion"))
        except kube.KubeError as exc:
            if exc.kind == "conflict":
                continue
            if exc.kind == "not_found":
                return None, []
            raise
        raise Waiting()
    raise kube.KubeError("transient", "the object kept changing while it was being deleted")


class Waiting(Exception):
    """The change was pushed; the object is still terminating."""
