"""The snapshot refresh: a constant number of paginated LISTs written into the snapshot tables.

Per managed cluster (issue 28): the refresh of a cluster lists through that cluster's own client and
writes its rows only; its lock, its coalescing flags and whether a watcher keeps its snapshot
(``informer_alive``) are shared-cache keys of its own (:func:`cluster_key`: the default cluster keeps the
keys of single-cluster versions), so that two clusters never hold back, coalesce or skip each other's
refreshes. The Celery task carries the cluster's primary key, none for the default cluster (the message
of single-cluster versions); beat's periodic refresh (:func:`refresh_unwatched`) asks for one per managed
cluster that no watcher keeps.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from liqo_rules import peers as liqo_peers
from liqo_rules.selectors.match import virtual_node_labels
from liqo_rules.spec import local_cluster_id_from
from offloading.cluster import kube
from offloading.cluster.managed import api_client_for
from offloading.models import (
    Cluster,
    ManagedCluster,
    SnapshotState,
    VirtualNode,
)
from offloading.models.fleet import ManagedRef, is_default, managed_pk
from offloading.models.managed import ensure_configured
from offloading.queue import enqueue_refresh
from offloading.snapshot.namespacemaps import refresh_maps
from offloading.snapshot.offloadings import NamespaceRefresh, offloading_page_size

log = logging.getLogger(__name__)


_REFRESH_LOCK = "liqo-dash:refresh-lock"


_REFRESH_REQUESTED = "liqo-dash:refresh-requested"


_REFRESH_AGAIN = "liqo-dash:refresh-again"


_INFORMER_ALIVE = "liqo-dash:informer-alive"


def cluster_key(base: str, managed: ManagedRef = None) -> str:
    """The shared-cache key ``base`` of one managed cluster: the default cluster's is ``base`` itself (as
    in single-cluster versions: a rolling upgrade keeps its lock and flags), another's ``base:<pk>``."""
    return base if is_default(managed) else f"{base}:{managed_pk(managed)}"


def _task_argument(managed: ManagedRef) -> int | None:
    """What the refresh task is sent for ``managed``: nothing for the default cluster, else its key."""
    return None if is_default(managed) else managed_pk(managed)


def local_cluster_id(managed: ManagedRef = None) -> str:
    """The local cluster id of ``managed`` (SnapshotState.local_id_of: the configured one for the default
    cluster, else the one the refresh or the watcher discovered; may be empty)."""
    return SnapshotState.local_id_of(managed)


def informer_alive(seconds: float | None, managed: ManagedRef = None) -> None:
    """The watcher keeps every kind of ``managed`` (None: the default cluster) synced, for ``seconds``
    (None: it stopped): refreshes of that cluster are not needed."""
    key = cluster_key(_INFORMER_ALIVE, managed)
    if seconds:
        cache.set(key, 1, timeout=seconds)
    else:
        cache.delete(key)


def watcher_keeps_snapshot(managed: ManagedRef = None) -> bool:
    """Whether the watcher keeps every kind of ``managed`` synced now (see :func:`informer_alive`)."""
    return bool(cache.get(cluster_key(_INFORMER_ALIVE, managed)))


def trigger_refresh(managed: ManagedRef = None) -> None:
    """Ask for a refresh of ``managed`` soon; many triggers within a second coalesce into one refresh.
    Nothing while the watcher keeps that snapshot (it brings the change itself; a full refresh would
    re-read all)."""
    if watcher_keeps_snapshot(managed):
        return
    if cache.add(cluster_key(_REFRESH_REQUESTED, managed), 1, timeout=5):
        argument = _task_argument(managed)
        transaction.on_commit(lambda: enqueue_refresh(countdown=0.5, managed=argument))


def refresh_unwatched() -> list[str]:
    """Beat's periodic refresh: ask for a refresh of every managed cluster whose snapshot no watcher
    keeps now (each cluster judged alone: one whose informer is alive is skipped). Returns their names."""
    ensure_configured()  # the default cluster's row (and LIQO_DASH_CLUSTERS'), on a database that has none yet
    asked = []
    for cluster in ManagedCluster.objects.all():
        if watcher_keeps_snapshot(cluster):
            continue
        enqueue_refresh(countdown=0, managed=_task_argument(cluster))
        asked.append(cluster.name)
    return asked


@dataclass
class RefreshReport:
    ok: bool
    list_calls: int = 0
    clusters: int = 0
    namespaces: int = 0
    offloadings: int = 0
    changed: int = 0
    drift: int = 0
    error: str = ""


def refresh_once(managed: ManagedRef = None) -> RefreshReport | None:
    """Run :func:`refresh` of ``managed`` unless one of that cluster is already running anywhere; a
    refresh asked for meanwhile runs right after the current one (so no trigger is lost). Returns None
    when it only queued. Another cluster's refresh neither waits for it nor is coalesced with it."""
    lock, again = cluster_key(_REFRESH_LOCK, managed), cluster_key(_REFRESH_AGAIN, managed)
    owner = f"{time.monotonic()}:{random.random()}"
    # Why 60 s: a killed worker's lock must not hold refreshes back for long; a refresh of 10,000
    # namespaces takes a few seconds, and an expired lock only allows two refreshes at once.
    if not cache.add(lock, owner, timeout=60):
        cache.set(again, 1, timeout=300)
        return None
    # A trigger that arrives from now on must schedule another refresh: this one may list too early.
    cache.delete(cluster_key(_REFRESH_REQUESTED, managed))
    try:
        return refresh(managed)
    finally:
        if cache.get(lock) == owner:
            cache.delete(lock)
        if cache.delete(again):
            enqueue_refresh(countdown=0.2, managed=_task_argument(managed))


def _client_of(managed: int) -> Any:
    """The client the refresh of ``managed`` lists through: the process's own (None) for the default
    cluster, as before; another cluster's own client (raises KubeError when it has no usable one)."""
    if is_default(managed):
        return None
    return api_client_for(ManagedCluster.objects.get(pk=managed))


def refresh(managed: ManagedRef = None) -> RefreshReport:
    """Rebuild the snapshot of ``managed`` (None: the default cluster) from a constant number of paginated
    LIST calls, through that cluster's client; record drift. Only that cluster's rows are written, and
    only its rows not listed are deleted; a failure is noted on its own SnapshotState."""
    started = time.monotonic()
    now = timezone.now()
    managed = managed_pk(managed)
    SnapshotState.touch(managed, last_attempt_at=now)
    try:
        api = _client_of(managed)
        listed = {
            "fc": kube.list_foreign_clusters(api),
            "vn": kube.list_virtual_nodes(api),
            "nodes": kube.list_virtual_node_nodes(api),
            "ns": kube.list_namespaces(api),
        }
    except kube.KubeError as exc:
        SnapshotState.touch(managed, last_error=exc.message)
        return RefreshReport(ok=False, error=exc.message)
    calls = sum(result.calls for result in listed.values())
    report = RefreshReport(ok=True)
    with transaction.atomic():
        report.clusters = _store_clusters(listed["fc"].items, listed["vn"].items, listed["nodes"].items, now, managed)
    namespaces = NamespaceRefresh(now, managed)
    namespaces.namespaces(listed["ns"].items)
    report.namespaces = len(listed["ns"].items)
    del listed  # the offloadings are read a page at a time (see nsrefresh): memory stays flat
    try:
        for page, _version in kube.list_pages("namespaceoffloadings", offloading_page_size(report.clusters), api):
            calls += 1
            namespaces.offloadings_page(page)
    except kube.KubeError as exc:
        # The pages written so far hold what was listed; the namespaces not reached wait for the next refresh.
        SnapshotState.touch(managed, last_error=exc.message)
        return RefreshReport(ok=False, list_calls=calls, error=exc.message)
    namespaces.finish()
    try:
        calls += refresh_maps(now, managed, api)
    except kube.KubeError as exc:
        log.warning("NamespaceMaps not listed: %s", exc.message)  # the offloadings are still good
    report.list_calls = calls
    report.offloadings, report.changed, report.drift = namespaces.offloadings, namespaces.changed, namespaces.drift
    updates: dict[str, Any] = {
        "last_success_at": now,
        "last_error": "",
        "last_duration_ms": int((time.monotonic() - started) * 1000),
        "last_list_calls": calls,
    }
    if namespaces.local_cluster_id:
        updates["local_cluster_id"] = namespaces.local_cluster_id
    SnapshotState.touch(managed, **updates)
    return report


CLUSTER_FIELDS = [
    "name",
    "role",
    "networking_status",
    "authentication_status",
    "offloading_status",
    "modules",
    "api_server_url",
    "resource_version",
    "refreshed_at",
]
VIRTUAL_NODE_FIELDS = ["cluster_id", "labels", "has_node", "capacity", "healthy", "conditions", "refreshed_at"]


def cluster_row(fc: dict[str, Any], now: Any, managed: ManagedRef = None) -> Cluster:
    """The snapshot row of one ForeignCluster (peer conditions summed up per module)."""
    meta, spec, status = fc.get("metadata") or {}, fc.get("spec") or {}, fc.get("status") or {}
    modules = status.get("modules") or {}
    summary: dict[str, dict[str, Any]] = {}
    for module in ("networking", "authentication", "offloading"):
        state, alerts = liqo_peers.module_status(modules.get(module))
        summary[module] = {
            "status": state,
            "alerts": alerts,
            "conditions": (modules.get(module) or {}).get("conditions") or [],
        }
    row = Cluster(
        cluster_id=spec.get("clusterID") or meta.get("name", ""),
        name=meta.get("name", ""),
        role=status.get("role", "Unknown"),
        networking_status=summary["networking"]["status"],
        authentication_status=summary["authentication"]["status"],
        offloading_status=summary["offloading"]["status"],
        modules=summary,
        api_server_url=status.get("apiServerUrl", "") or "",
        resource_version=meta.get("resourceVersion", ""),
        refreshed_at=now,
    )
    if managed is not None:  # else the default cluster, filled in when written (offloading.models.fleet)
        row.managed_id = managed_pk(managed)
    return row


def virtual_node_row(
    vn: dict[str, Any], nodes_by_name: dict[str, dict[str, Any]], now: Any, managed: ManagedRef = None
) -> VirtualNode:
    """The snapshot row of one VirtualNode, with the labels of its Node (when there is one)."""
    meta, spec = vn.get("metadata") or {}, vn.get("spec") or {}
    node = liqo_peers.node_of(vn, nodes_by_name)
    row = VirtualNode(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        cluster_id=spec.get("clusterID", ""),
        labels=virtual_node_labels(vn, node),
        has_node=node is not None,
        capacity=(spec.get("resourceQuota") or {}).get("hard") or {},
        healthy=liqo_peers.virtual_node_healthy(vn),
        conditions=(vn.get("status") or {}).get("conditions") or [],
        refreshed_at=now,
    )
    if managed is not None:
        row.managed_id = managed_pk(managed)
    return row


def _store_clusters(
    foreign_clusters: list[dict[str, Any]],
    virtual_nodes: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    now: Any,
    managed: int,
) -> int:
    rows = [cluster_row(fc, now, managed) for fc in foreign_clusters]
    Cluster.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["managed", "cluster_id"], update_fields=CLUSTER_FIELDS
    )
    Cluster.objects.filter(managed_id=managed).exclude(cluster_id__in=[r.cluster_id for r in rows]).delete()

    nodes_by_name = {str((n.get("metadata") or {}).get("name", "")): n for n in nodes}
    vn_rows = [virtual_node_row(vn, nodes_by_name, now, managed) for vn in virtual_nodes]
    VirtualNode.objects.bulk_create(
        vn_rows,
        update_conflicts=True,
        unique_fields=["managed", "namespace", "name"],
        update_fields=VIRTUAL_NODE_FIELDS,
    )
    keep = {(v.namespace, v.name) for v in vn_rows}
    stale = [
        pk
        for pk, ns, name in VirtualNode.objects.filter(managed_id=managed).values_list("pk", "namespace", "name")
        if (ns, name) not in keep
    ]
    VirtualNode.objects.filter(pk__in=stale).delete()
    return len(rows)


def discover_local_cluster_id(offloadings: list[dict[str, Any]]) -> str:
    """The local cluster id, read from the first DefaultName offloading Liqo has named."""
    for obj in offloadings:
        found = local_cluster_id_from(
            (obj.get("metadata") or {}).get("namespace", ""),
            obj.get("spec") or {},
            (obj.get("status") or {}).get("remoteNamespaceName", ""),
        )
        if found:
            return found
    return ""
