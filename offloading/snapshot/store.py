"""Writing observed NamespaceOffloadings into the snapshot rows (namespace, per-cluster state, transitions)."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Model
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from liqo_rules import constants as liqo
from liqo_rules.spec import normalize_spec
from liqo_rules.status import cluster_status_table
from offloading.gitops.detect import facts as gitops_facts
from offloading.models import (
    ClusterOffloading,
    Namespace,
    StatusTransition,
)
from offloading.models.fleet import ManagedRef, managed_pk

log = logging.getLogger(__name__)


def parse_time(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None


def actor_from_managed_fields(obj: dict[str, Any]) -> str:
    """Who last wrote the spec, from managedFields (the newest manager other than Liqo's controller)."""
    entries = [
        e
        for e in (obj.get("metadata") or {}).get("managedFields") or []
        if e.get("manager") != liqo.CONTROLLER_MANAGER and e.get("subresource") != "status"
    ]
    if not entries:
        return "unknown"
    entries.sort(key=lambda e: e.get("time") or "")
    return entries[-1].get("manager") or "unknown"


def _offloading_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    return {
        "offloaded": True,
        "offloading_uid": meta.get("uid", ""),
        "offloading_spec": normalize_spec(obj.get("spec") or {}),
        "offloading_status": status,
        "offloading_phase": status.get("offloadingPhase", ""),
        "offloading_generation": meta.get("generation") or 0,
        "offloading_observed_generation": status.get("observedGeneration") or 0,
        "offloading_resource_version": meta.get("resourceVersion", ""),
        "offloading_deleting": bool(meta.get("deletionTimestamp")),
        "offloading_managed_by": actor_from_managed_fields(obj),
        "remote_namespace_name": status.get("remoteNamespaceName", ""),
        "gitops_facts": gitops_facts(obj),
    }


NOT_OFFLOADED: dict[str, Any] = {
    "offloaded": False,
    "offloading_uid": "",
    "offloading_spec": None,
    "offloading_status": None,
    "offloading_phase": "",
    "offloading_generation": 0,
    "offloading_observed_generation": 0,
    "offloading_resource_version": "",
    "offloading_deleting": False,
    "offloading_managed_by": "",
    "remote_namespace_name": "",
    "gitops_facts": {},
}


# Per-cluster states kept as rows: a cluster that is not selected and holds no remote namespace is
# left out (with 200 peers that is over 90% of Liqo's per-cluster conditions, and nothing to show).
_IDLE_STATES = ("", "NotSelected")


def _cluster_rows(namespace_id: int, obj: dict[str, Any], managed: int) -> list[ClusterOffloading]:
    return [
        ClusterOffloading(
            managed_id=managed,
            namespace_id=namespace_id,
            cluster_id=row["cluster_id"],
            selected=bool(row["selected"]),
            state=row["state"] or "",
            message=row.get("message") or "",
            since=parse_time(row.get("last_transition")),
        )
        for row in cluster_status_table(obj)
        # A stale Ready (Liqo never removes it) is kept as a NotSelected row that says so (issue 27).
        if row["selected"] or (row["state"] or "") not in _IDLE_STATES or row["stale_ready"]
    ]


def update_rows(rows: list[Any], field_names: list[str]) -> None:
    """Write ``field_names`` of the saved model ``rows`` (all of one model): one ``UPDATE ... WHERE pk``
    sent for every row at once (executemany). What ``bulk_update`` does, without its CASE WHEN per row
    and field, whose building was most of the watcher's CPU during a bulk (13 fields x a batch of rows)."""
    if not rows:
        return
    model: type[Model] = type(rows[0])
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    fields = [meta.get_field(name) for name in field_names]
    columns = [str(getattr(field, "column", "")) for field in fields]
    pk_column = str(getattr(meta.pk, "column", "id"))
    assignments = ", ".join(f"{quote(column)} = %s" for column in columns)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(pk_column)} = %s"
    params = [
        [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields] + [row.pk]  # type: ignore[union-attr]
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def replace_offloading_rows(
    observed: dict[str, dict[str, Any] | None], now: Any, history: bool = True, managed: ManagedRef = None
) -> int:
    """Write the observed NamespaceOffloading (or None: not offloaded) of each namespace name into the
    snapshot of ``managed`` (None: the default cluster): the namespace row, its per-cluster rows, and a
    StatusTransition for every phase or per-cluster state that changed. Returns how many transitions
    were recorded."""
    if not observed:
        return 0
    with transaction.atomic():
        return _replace_offloading_rows(observed, now, history, managed_pk(managed))


def _replace_offloading_rows(observed: dict[str, dict[str, Any] | None], now: Any, history: bool, managed: int) -> int:
    # Why the row locks: apply, watcher and refresh may write the same namespace at once; on
    # PostgreSQL the delete + insert of its per-cluster rows would otherwise collide. Locking in name
    # order avoids deadlocks; SQLite's IMMEDIATE transactions already serialise writers.
    namespaces = {
        n.name: n
        for n in Namespace.objects.select_for_update()
        .filter(managed_id=managed, name__in=list(observed))
        .only("pk", "name", "offloaded", "offloading_phase")
        .order_by("name")
    }
    old_states: dict[int, dict[str, str]] = defaultdict(dict)
    for namespace_id, cluster_id, state in ClusterOffloading.objects.filter(
        namespace_id__in=[n.pk for n in namespaces.values()]
    ).values_list("namespace_id", "cluster_id", "state"):
        old_states[namespace_id][cluster_id] = state
    transitions: list[StatusTransition] = []
    new_rows: list[ClusterOffloading] = []
    updated: list[Namespace] = []
    for name, obj in observed.items():
        namespace = namespaces.get(name)
        if namespace is None or (obj is None and not namespace.offloaded and not old_states.get(namespace.pk)):
            continue  # unknown, or not offloaded before nor now: nothing to write
        fields = _offloading_fields(obj) if obj else dict(NOT_OFFLOADED)
        if fields["offloading_phase"] != namespace.offloading_phase:
            transitions.append(
                StatusTransition(
                    managed_id=managed,
                    time=now,
                    namespace=name,
                    old=namespace.offloading_phase,
                    new=fields["offloading_phase"],
                )
            )
        for field_name, value in fields.items():
            setattr(namespace, field_name, value)
        namespace.refreshed_at = now
        updated.append(namespace)
        rows = _cluster_rows(namespace.pk, obj, managed) if obj else []
        new_rows += rows
        new_states = {row.cluster_id: row.state for row in rows}
        before_states = old_states.get(namespace.pk, {})
        for cluster_id in sorted(set(new_states) | set(before_states)):
            before, after = before_states.get(cluster_id, ""), new_states.get(cluster_id, "")
            if before != after:
                transitions.append(
                    StatusTransition(
                        managed_id=managed, time=now, namespace=name, cluster_id=cluster_id, old=before, new=after
                    )
                )
    update_rows(updated, [*NOT_OFFLOADED, "refreshed_at"])
    ClusterOffloading.objects.filter(namespace_id__in=[n.pk for n in updated if n.pk in old_states]).delete()
    ClusterOffloading.objects.bulk_create(new_rows, batch_size=2000)
    if not history:
        return 0
    StatusTransition.objects.bulk_create(transitions, batch_size=2000)
    return len(transitions)


def store_offloading(namespace_name: str, obj: dict[str, Any], managed: ManagedRef = None) -> None:
    """Write one observed NamespaceOffloading into the snapshot (after our own apply)."""
    replace_offloading_rows({namespace_name: obj}, timezone.now(), managed=managed)


def mark_namespace_unoffloaded(namespace_name: str, managed: ManagedRef = None) -> None:
    replace_offloading_rows({namespace_name: None}, timezone.now(), managed=managed)
