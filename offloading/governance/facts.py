"""What governance compares and names: the hash of a change as an approver sees it, the snapshot's
version of a namespace, and the small helpers and the refusal shared by ``holds``, ``approvals`` and
``beat``."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime
from typing import Any

from django.urls import reverse
from django.utils import timezone

from liqo_rules.spec import normalize_spec
from offloading.choices import ChangeAction, ChangeState, Source
from offloading.context import Actor, new_request_id
from offloading.models import BulkRequest, ChangeRequest, Namespace
from offloading.models.fleet import is_default, policy_cluster_name

log = logging.getLogger(__name__)

WAITING = (ChangeState.AWAITING_APPROVAL, ChangeState.SCHEDULED)


class Refused(Exception):
    """A governance step that cannot be taken: ``code`` is the HTTP status (400, 403, 404, 409),
    ``field`` the field the message belongs to."""

    def __init__(self, code: int, message: str, field: str = "change") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


# --------------------------------------------------------------------------------------------------
# Facts


def change_hash(change: ChangeRequest) -> str:
    """The hash of a change as an approver sees it."""
    body = {
        "namespace": change.namespace,
        "action": change.action,
        "desired": normalize_spec(change.desired_spec) if change.desired_spec else None,
        "base": normalize_spec(change.base_spec) if change.base_spec else None,
        "label": bool(change.label_namespace),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def version_of(namespace: Namespace | None) -> dict[str, Any]:
    """The snapshot's version of a namespace's offloading, as an approval keeps it."""
    if namespace is None or not namespace.offloaded:
        return {"offloaded": False}
    spec = normalize_spec(namespace.offloading_spec or {})
    return {
        "offloaded": True,
        "uid": namespace.offloading_uid,
        "generation": namespace.offloading_generation,
        "spec": hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest(),
        "resourceVersion": namespace.offloading_resource_version,
    }


def same_version(seen: dict[str, Any], now: dict[str, Any]) -> bool:
    keys = ("offloaded", "uid", "generation", "spec")
    return all(seen.get(k) == now.get(k) for k in keys)


def labels_of(name: str, managed: int | None = None) -> dict[str, str]:
    """The labels of namespace ``name`` of managed cluster ``managed`` (a change's; None: the default)."""
    return Namespace.objects.of(managed).filter(name=name).values_list("labels", flat=True).first() or {}


def namespaces_of(changes: list[ChangeRequest]) -> Any:
    """The snapshot's namespaces of ``changes`` (of one request or bulk: one managed cluster, the first's)."""
    managed = changes[0].managed_id if changes else None
    return Namespace.objects.of(managed).filter(name__in=[c.namespace for c in changes])


def policy_action(change: ChangeRequest) -> str:
    return {ChangeAction.UNOFFLOAD: "unoffload", ChangeAction.UPDATE: "edit"}.get(
        ChangeAction(change.action), "offload"
    )


def page_path(name: str, managed: int | None, pk: int | None = None) -> str:
    """The page ``name`` (an ``offloading:`` URL name; ``pk``: its change or bulk) of managed cluster
    ``managed`` (its pk; None: the default): the default's plain path, another cluster's copy under
    ``/m/<name>/`` (the URL conf's ``cluster:`` names, ``liqo_dash/urls.py``), so that an alert leads to
    the cluster the change is in."""
    ids = {"pk": pk} if pk is not None else {}
    cluster = policy_cluster_name(managed)
    if cluster is None:
        return reverse(f"offloading:{name}", kwargs=ids or None)
    return reverse(f"cluster:{name}", kwargs={"cluster": cluster, **ids})


def change_path(change: ChangeRequest) -> str:
    return page_path("change_detail", change.managed_id, change.pk)


def bulk_path(bulk: BulkRequest) -> str:
    return page_path("bulk_detail", bulk.managed_id, bulk.pk)


def queue_of(managed: int | None) -> int | None:
    """What ``offloading.queue`` is told of a change's cluster (its queue, ``queue.cluster_queue``): None
    for the default cluster, as the write path says it."""
    return None if managed is None or is_default(managed) else int(managed)


def system_actor() -> Actor:
    return Actor(None, "system", Source.TASK, new_request_id())


def at_text(value: datetime) -> str:
    return value.astimezone(timezone.get_current_timezone()).strftime("%Y-%m-%d %H:%M %Z")
