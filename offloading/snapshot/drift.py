"""Drift: the offloading changed in the cluster without a change of ours."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from liqo_rules import constants as liqo
from liqo_rules.spec import normalize_spec
from offloading.audit.events import record_drift_observed
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.cluster import kube
from offloading.models import (
    AuditEvent,
    ChangeRequest,
    Namespace,
    SnapshotState,
)
from offloading.models.fleet import ManagedRef, managed_pk
from offloading.snapshot.store import actor_from_managed_fields, replace_offloading_rows

log = logging.getLogger(__name__)


def _changes_of(managed_id: int) -> QuerySet[ChangeRequest]:
    """The changes of liqo-dash in the managed cluster ``managed_id``, against which an observed change is
    told ours or drift: a change of another cluster is never ours here."""
    return ChangeRequest.objects.filter(managed_id=managed_id)


def record_drift(old: Namespace | None, obj: dict[str, Any] | None, now: Any) -> bool:
    """Record an audit event when the offloading changed in the cluster without a change of ours, under
    the managed cluster of ``old`` (every cluster the watcher or the refresh holds is audited)."""
    managed = managed_pk(old.managed_id if old is not None else None)
    changes = _changes_of(managed)
    old_spec = old.offloading_spec if old is not None and old.offloaded else None
    new_spec = normalize_spec(obj.get("spec") or {}) if obj else None
    old_uid = old.offloading_uid if old is not None and old.offloaded else ""
    new_uid = ((obj or {}).get("metadata") or {}).get("uid", "")
    recreated = bool(old_uid and new_uid and old_uid != new_uid)
    if old_spec == new_spec and not recreated:
        return False
    name = (obj or {}).get("metadata", {}).get("namespace") or (old.name if old else "")
    if obj is not None:
        meta = obj.get("metadata") or {}
        change_id = (meta.get("annotations") or {}).get(kube.CHANGE_ID_ANNOTATION, "")
        # Ours: the very object (uid) and generation one of our writes produced, as the worker recorded
        # it; or, while our change is being applied (its result not recorded yet), the object carrying
        # that pending change's id in this namespace. A recreated object with a copied annotation has
        # another uid, so it is drift.
        ours = (
            bool(meta.get("uid"))
            and changes.filter(
                namespace=name, result_uid=meta.get("uid"), result_generation=meta.get("generation")
            ).exists()
        ) or changes.filter(
            pk=int(change_id) if change_id.isdigit() else -1, namespace=name, state__in=ChangeState.pending()
        ).exists()
        if ours:
            return False
        action = AuditAction.DRIFT_CREATED if old_spec is None else AuditAction.DRIFT_UPDATED
        actor = actor_from_managed_fields(obj)
    else:
        # Ours while the unoffload is pending, and also when it gave up waiting for Liqo's finalizer
        # (failed after DELETE_WAIT) but the deletion it started went through later.
        recent = timezone.now() - timedelta(seconds=4 * settings.LIQO_DASH["DELETE_WAIT"])
        ours = changes.filter(
            Q(state__in=ChangeState.pending()) | Q(state=ChangeState.FAILED, finished_at__gte=recent),
            namespace=name,
            action=ChangeAction.UNOFFLOAD,
        ).exists()
        if ours:
            return False
        action = AuditAction.DRIFT_DELETED
        actor = "unknown"
    detail = " (deleted and created again)" if recreated else ""
    message = (
        f"{AuditAction(action).label}{detail}: field manager {actor}; the user behind it is unknown unless the "
        "cluster's audit log says more"
    )
    record_drift_observed(action, name, actor, old_spec, new_spec, message, managed=managed)
    return True


def open_drift(namespace: Namespace) -> dict[str, Any]:
    """The newest drift of the namespace not yet answered (by a change of ours or an acceptance):
    ``{"drift": the event, "drift_mine": our last applied change (or None)}``, or {} when none is open."""
    trail = AuditEvent.objects.filter(managed_id=managed_pk(namespace.managed_id), namespace=namespace.name)
    drift = trail.filter(source=Source.EXTERNAL).exclude(action=AuditAction.DRIFT_ACCEPTED).order_by("-seq").first()
    if drift is None:
        return {}
    answered = trail.filter(
        seq__gt=drift.seq,
        action__in=[AuditAction.DRIFT_ACCEPTED, AuditAction.REQUESTED],
    ).exists()
    if answered:
        return {}
    mine = (
        _changes_of(managed_pk(namespace.managed_id))
        .filter(namespace=namespace.name, state=ChangeState.APPLIED)
        .exclude(action=ChangeAction.UNOFFLOAD)
        .order_by("-finished_at", "-id")
        .first()
    )
    return {"drift": drift, "drift_mine": mine}


LABEL_SETTLE_SECONDS = 60  # how long after one of our changes a removed scheduling label is Liqo's upkeep


def _change_in_motion(namespace: str, managed_id: int) -> bool:
    recent = timezone.now() - timedelta(seconds=LABEL_SETTLE_SECONDS)
    return (
        _changes_of(managed_id)
        .filter(Q(state__in=ChangeState.pending()) | Q(updated_at__gte=recent), namespace=namespace)
        .exists()
    )


def record_label_drift(
    old: Namespace | None,
    namespace_obj: dict[str, Any],
    offloading: dict[str, Any] | None = None,
    reread: Callable[[], dict[str, Any] | None] | None = None,
) -> bool:
    """Record drift when the namespace's scheduling label (``liqo.io/scheduling-enabled``) was set or
    removed in the cluster by someone else than the dashboard or Liqo (kubectl label, for example): Liqo
    then starts or stops scheduling the namespace's pods on virtual nodes. ``offloading``: the
    namespace's NamespaceOffloading as seen now (None: there is none). ``reread``: reads it again from the
    API server, asked before a removal is called drift when ``offloading`` may lag the namespace (the
    watcher's two streams: Liqo removes the label after the offloading turned Local or went away, and the
    namespace's event can come first)."""
    if old is None:
        return False
    managed = managed_pk(old.managed_id)
    labels = (namespace_obj.get("metadata") or {}).get("labels") or {}
    before, after = (old.labels or {}).get(liqo.SCHEDULING_LABEL), labels.get(liqo.SCHEDULING_LABEL)
    if before == after:
        return False
    if after is None and not _liqo_wants_the_label(offloading):
        return False  # Liqo removes it itself when the offloading goes away or turns Local
    if after is None and reread is not None and not _liqo_wants_the_label(reread()):
        return False  # the same, seen on the API server: the offloading's own event is on its way
    if after is None and _change_in_motion(old.name, managed):
        # A removal says nothing of who removed it; while a change of ours to this namespace is in
        # flight or just finished, Liqo's controller is following it (a strategy that went Local and
        # back can be seen half-way: the namespace listed before the offloading moved again).
        return False
    actor = _label_writer(namespace_obj, liqo.SCHEDULING_LABEL, removed=after is None)
    if actor in (settings.LIQO_DASH["FIELD_MANAGER"], liqo.CONTROLLER_MANAGER):
        return False  # ours, or Liqo's controller keeping the label in line with the pod strategy
    what = "set" if after is not None else "removed"
    message = (
        f"Scheduling label {liqo.SCHEDULING_LABEL} {what} outside liqo-dash (field manager: {actor}; "
        "the user behind it is unknown unless the cluster's audit log says more)"
    )
    before_labels, after_labels = (
        {"labels": {liqo.SCHEDULING_LABEL: before}},
        {"labels": {liqo.SCHEDULING_LABEL: after}},
    )
    record_drift_observed(
        AuditAction.DRIFT_UPDATED, old.name, actor, before_labels, after_labels, message, managed=managed
    )
    return True


def _liqo_wants_the_label(offloading: dict[str, Any] | None) -> bool:
    """Whether Liqo's controller keeps the scheduling label on: an offloading that is not being deleted,
    with a pod strategy that may schedule remotely."""
    if offloading is None or (offloading.get("metadata") or {}).get("deletionTimestamp"):
        return False
    strategy = normalize_spec(offloading.get("spec") or {}).get("podOffloadingStrategy")
    return strategy in (liqo.LOCAL_AND_REMOTE, liqo.REMOTE)


def _label_writer(obj: dict[str, Any], key: str, *, removed: bool) -> str:
    """Who wrote a label, from managedFields: the manager that owns the key; for a removed label (no
    owner left), the manager of the newest entry."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    if not removed:
        for entry in entries:
            labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
            if f"f:{key}" in labels:
                return str(entry.get("manager") or "unknown")
    newest = sorted(enumerate(entries), key=lambda pair: (pair[1].get("time") or "", pair[0]))
    return str(newest[-1][1].get("manager") or "unknown") if newest else "unknown"


def observe_offloading(namespace_name: str, obj: dict[str, Any] | None, managed: ManagedRef = None) -> bool:
    """Apply one watched NamespaceOffloading event to the snapshot of ``managed`` (None: the default
    cluster) at once (``obj`` None: deleted), recording drift as the full refresh would. Returns False
    when the namespace is not in the snapshot yet (the caller then asks for a full refresh)."""
    now = timezone.now()
    managed = managed_pk(managed)
    with transaction.atomic():
        # Read under the row lock, so a refresh committing the same drift meanwhile is seen.
        old = Namespace.objects.select_for_update().filter(managed_id=managed, name=namespace_name).first()
        if old is None:
            return False
        if obj is not None and _older(obj, old.offloading_resource_version):
            return True  # a late event: the snapshot already holds something newer
        if SnapshotState.get(managed).last_success_at is not None:
            record_drift(old, obj, now)
        replace_offloading_rows({namespace_name: obj}, now, managed=managed)
    return True


def _older(obj: dict[str, Any], known_version: str) -> bool:
    """Whether ``obj`` is older than the resourceVersion we hold. Versions are opaque in Kubernetes,
    but etcd's (and the sandbox's) are increasing integers; anything else is never called older."""
    version = (obj.get("metadata") or {}).get("resourceVersion", "")
    if version.isdigit() and known_version.isdigit():
        return int(version) < int(known_version)
    return False
