"""The Kubernetes writes of one change: create, update or delete the NamespaceOffloading, idempotently and
with conflict detection by generation and uid."""

from __future__ import annotations

import logging
from typing import Any

from offloading import kube
from offloading.choices import ChangeAction
from offloading.liqo import constants as liqo
from offloading.liqo.manifest import manifest
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
        known = Namespace.objects.filter(name=change.namespace).values_list("labels", flat=True).first() or {}
        if known.get(liqo.SCHEDULING_LABEL) != "true":
            warnings += kube.label_namespace(change.namespace, {liqo.SCHEDULING_LABEL: "true"}).warnings
            added_label = True
    try:
        result = kube.create_offloading(change.namespace, body)
    except kube.KubeError as exc:
        if added_label and exc.kind != "exists":
            try:
                kube.label_namespace(change.namespace, {liqo.SCHEDULING_LABEL: None})
            except kube.KubeError:
                log.warning("could not remove the scheduling label of %s after a refused create", change.namespace)
        raise
    result.warnings = warnings + result.warnings
    return result


def push_spec(change: ChangeRequest) -> tuple[dict[str, Any] | None, list[str]]:
    """Create or update the NamespaceOffloading; conflict if it moved since the requester saw it."""
    annotations = {kube.CHANGE_ID_ANNOTATION: str(change.pk), kube.REQUESTER_ANNOTATION: change.requester_name}
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


def push_delete(change: ChangeRequest) -> tuple[dict[str, Any] | None, list[str]]:
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
