"""The local NamespaceMaps in the snapshot (PeerNamespaceMap, MappingEntry): listed by the full refresh,
followed by the watcher (kind ``namespacemaps``, ``offloading.snapshot.namespacemaps_watch``). Only local maps count (liqo_rules.mapping
.local_map_cluster); a map's entries are rewritten only where they changed.
"""

from __future__ import annotations

from typing import Any

from liqo_rules.mapping import local_map_cluster, map_entries
from offloading.cluster import kube
from offloading.models.fleet import ManagedRef, managed_pk
from offloading.models.mapping import MappingEntry, PeerNamespaceMap


def object_meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def write_map(nm: dict[str, Any], now: Any, managed: ManagedRef = None) -> bool:
    """Store one NamespaceMap (a non-local one is ignored) in the snapshot of ``managed`` (None: the
    default cluster); True when something changed."""
    cluster_id = local_map_cluster(nm)
    if not cluster_id:
        return False
    managed = managed_pk(managed)
    meta = object_meta(nm)
    version = str(meta.get("resourceVersion") or "")
    row = PeerNamespaceMap.objects.filter(managed_id=managed, cluster_id=cluster_id).first()
    if row is not None and version and row.resource_version == version:
        return False
    if row is None:
        row = PeerNamespaceMap(managed_id=managed, cluster_id=cluster_id)
    row.namespace, row.name = meta.get("namespace", ""), meta.get("name", "")
    row.resource_version, row.refreshed_at = version, now
    row.save()
    wanted = map_entries(nm)
    have = {
        name: (pk, (desired, remote, phase))
        for pk, name, desired, remote, phase in row.entries.values_list(
            "pk", "namespace", "desired", "current_remote", "current_phase"
        )
    }
    gone = [pk for name, (pk, _) in have.items() if name not in wanted]
    if gone:
        MappingEntry.objects.filter(pk__in=gone).delete()
    changed = [
        MappingEntry(
            managed_id=managed,
            namespace_map=row,
            cluster_id=cluster_id,
            namespace=name,
            desired=values[0],
            current_remote=values[1],
            current_phase=values[2],
        )
        for name, values in wanted.items()
        if name not in have or have[name][1] != values
    ]
    MappingEntry.objects.bulk_create(
        changed,
        update_conflicts=True,
        unique_fields=["managed", "cluster_id", "namespace"],
        update_fields=["namespace_map", "desired", "current_remote", "current_phase"],
        batch_size=500,
    )
    return True


def forget_maps(keep: set[str] | None = None, drop: set[str] | None = None, managed: ManagedRef = None) -> None:
    """Delete the maps of the peers in ``drop``, or of every peer not in ``keep``, of ``managed``'s
    snapshot (None: the default cluster)."""
    rows = PeerNamespaceMap.objects.filter(managed_id=managed_pk(managed))
    if drop is not None:
        rows = rows.filter(cluster_id__in=drop)
    elif keep is not None:
        rows = rows.exclude(cluster_id__in=keep)
    rows.delete()


def refresh_maps(now: Any, managed: ManagedRef = None, api: Any = None) -> int:
    """The full refresh's part: LIST every NamespaceMap (paginated, through ``api``, the cluster's client;
    None: the process's own) and store the local ones in the snapshot of ``managed`` (None: the default
    cluster); returns the LIST calls made. Raises kube.KubeError like the other lists."""
    managed = managed_pk(managed)
    calls, seen = 0, set()
    for page, _version in kube.list_pages("namespacemaps", api=api):
        calls += 1
        for nm in page:
            cluster_id = local_map_cluster(nm)
            if cluster_id:
                seen.add(cluster_id)
                write_map(nm, now, managed)
    forget_maps(keep=seen, managed=managed)
    return calls
