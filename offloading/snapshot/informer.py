"""The snapshot kept like an informer: what each watched kind writes into the snapshot.

Every kind the watcher follows is one :class:`KindSync` in ``SYNCED`` (``register`` adds one): it gets
batches of watch events (``ADDED``/``MODIFIED``/``DELETED``), pages of a relist (as ``ADDED`` events,
``relist=True``) and, at the end of a relist, the keys it saw (rows of objects that were not seen are
removed). Only changed objects are written; each batch is one transaction (see watch_cluster).

Every KindSync writes the snapshot of one managed cluster (``managed``; None: the default cluster):
:func:`build` makes a full set for a cluster (each with its own memory: offloadings waiting for their
namespace, virtual nodes and their Nodes); ``SYNCED`` is the default cluster's set. A relist's sweep
forgets only its own cluster's rows.

Adding a kind (pods in offloaded namespaces, events) is a subclass with ``kind``, ``apply`` and
``relisted``, one more instance in :func:`build` (or a factory in ``EXTRA_KINDS``), and the kind's list method in
``kube._list_method`` plus its name in ``kube.WATCHED_KINDS``. Pods: list/watch all pods (or with a
label selector) and keep only those whose namespace is offloaded (``Namespace.offloaded``; set
``after = ("namespaces", "namespaceoffloadings")`` so those rows exist first); events: a field
selector on ``involvedObject.kind`` keeps the stream small, and rows can be capped per object.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.db.models import Q

from liqo_rules import constants as liqo
from offloading.cluster import kube
from offloading.cluster.errors import KubeError
from offloading.cluster.managed import talking_to
from offloading.models import Cluster, ManagedCluster, Namespace, SnapshotState, VirtualNode
from offloading.models.fleet import ManagedRef, managed_pk
from offloading.snapshot.drift import record_drift, record_label_drift
from offloading.snapshot.offloadings import offloading_page_size
from offloading.snapshot.refresh import (
    CLUSTER_FIELDS,
    VIRTUAL_NODE_FIELDS,
    cluster_row,
    discover_local_cluster_id,
    virtual_node_row,
)
from offloading.snapshot.store import parse_time, replace_offloading_rows

Event = tuple[str, dict[str, Any]]
_CHUNK = 500
READ_AGAIN_TIMEOUT = 2.0  # seconds for the one read that tells Liqo's removal of the scheduling label from drift

log = logging.getLogger(__name__)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _older(obj: dict[str, Any], known: str) -> bool:
    """Whether ``obj`` predates the version the snapshot holds (etcd's versions are increasing
    integers; anything else is never called older)."""
    version = _meta(obj).get("resourceVersion", "")
    return version.isdigit() and known.isdigit() and int(version) < int(known)


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[i : i + _CHUNK] for i in range(0, len(items), _CHUNK)]


class KindSync:
    """One watched kind: how its objects become snapshot rows."""

    kind = ""
    after: tuple[str, ...] = ()  # kinds whose first relist must be written before this kind lists
    managed: ManagedRef = None  # the managed cluster whose snapshot it writes (None: the default), set by build()

    @property
    def managed_id(self) -> int:
        """The primary key of the cluster it writes (resolved when it writes, never at import)."""
        return managed_pk(self.managed)

    def page_size(self) -> int:
        """Items per relist page (one page is held at a time): the API server's usual 500 for kinds of a
        few kB an object (namespaces, pods, events, nodes, peers); offloadings, which carry two conditions
        per peer, override it."""
        return kube.LIST_PAGE_SIZE

    def key(self, obj: dict[str, Any]) -> str:
        meta = _meta(obj)
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        raise NotImplementedError

    def relisted(self, seen: set[str], now: Any) -> None:
        """A relist ended: ``seen`` are the keys it listed; forget everything else."""
        raise NotImplementedError


SYNCED: dict[str, KindSync] = {}
# Kinds kept elsewhere (offloading.snapshot.inventory: pods, events...): factories of their KindSyncs,
# called by build() for every cluster's set.
EXTRA_KINDS: list[Callable[[], list[KindSync]]] = []


def register(sync: KindSync) -> KindSync:
    """Add ``sync`` to the default cluster's set (``SYNCED``)."""
    SYNCED[sync.kind] = sync
    return sync


def add_kinds(factory: Callable[[], list[KindSync]]) -> None:
    """Kinds of another module: in every set :func:`build` makes from now on, and in ``SYNCED`` now."""
    EXTRA_KINDS.append(factory)
    for sync in factory():
        register(sync)


class NamespaceSync(KindSync):
    kind = "namespaces"

    def __init__(self, offloadings: OffloadingSync | None = None) -> None:
        self.offloadings = offloadings  # its set's offloadings (None: the default set's), told of new namespaces

    def key(self, obj: dict[str, Any]) -> str:
        return str(_meta(obj).get("name", ""))

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        latest = {self.key(obj): (event, obj) for event, obj in events}
        managed = self.managed_id
        mine = Namespace.objects.filter(managed_id=managed)
        existing = {
            n.name: n
            for n in mine.filter(name__in=list(latest)).only(
                "name", "labels", "status_phase", "created_at", "offloaded", "offloading_spec", "offloading_deleting"
            )
        }
        learned = SnapshotState.get(managed).last_success_at is not None  # the first sync only learns
        rows, gone = [], []
        for name, (event, obj) in latest.items():
            if event == "DELETED":
                gone.append(name)
                continue
            meta = _meta(obj)
            row = Namespace(
                managed_id=managed,
                name=name,
                labels=meta.get("labels") or {},
                status_phase=(obj.get("status") or {}).get("phase", ""),
                created_at=parse_time(meta.get("creationTimestamp")),
                refreshed_at=now,
            )
            old = existing.get(name)
            if learned and old is not None and old.labels != row.labels:
                record_label_drift(old, obj, _offloading_of(old), reread=functools.partial(self._offloading_now, old))
            if old is None or (old.labels, old.status_phase, old.created_at) != (
                row.labels,
                row.status_phase,
                row.created_at,
            ):
                rows.append(row)
        Namespace.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["managed", "name"],
            update_fields=["labels", "status_phase", "created_at", "refreshed_at"],
            batch_size=_CHUNK,
        )
        for chunk in _chunks(gone):
            mine.filter(name__in=chunk).delete()
        new = [row.name for row in rows if row.name not in existing]
        if new:
            (self.offloadings or OFFLOADINGS).namespaces_added(new, now)

    def relisted(self, seen: set[str], now: Any) -> None:
        mine = Namespace.objects.filter(managed_id=self.managed_id)
        gone = [name for name in mine.values_list("name", flat=True) if name not in seen]
        for chunk in _chunks(gone):
            mine.filter(name__in=chunk).delete()

    def _offloading_now(self, namespace: Namespace) -> dict[str, Any] | None:
        """The namespace's offloading as this set's API server holds it now; when it cannot be read, as the
        snapshot holds it (the label is then judged as before)."""
        try:
            with talking_to(ManagedCluster.objects.filter(pk=self.managed_id).first()):
                return kube.get_offloading(namespace.name, timeout=READ_AGAIN_TIMEOUT)
        except KubeError as exc:
            log.warning("scheduling label of %s: its offloading could not be read again (%s)", namespace.name, exc)
            return _offloading_of(namespace)


def _offloading_of(namespace: Namespace) -> dict[str, Any] | None:
    """The namespace's offloading as the snapshot knows it, in the shape drift checks read."""
    if not namespace.offloaded:
        return None
    meta = {"deletionTimestamp": "deleting"} if namespace.offloading_deleting else {}
    return {"metadata": meta, "spec": namespace.offloading_spec or {}}


class OffloadingSync(KindSync):
    """NamespaceOffloadings named ``offloading``: the namespace's offloading fields, its per-cluster rows,
    transitions and drift. An offloading whose namespace is not in the snapshot yet waits for it."""

    kind = "namespaceoffloadings"
    after = ("namespaces", "foreignclusters")  # the peers are counted to size the pages

    def page_size(self) -> int:
        # Two conditions per peer in every offloading: fewer per page as the peers grow (about 3 MB a page).
        return offloading_page_size(managed=self.managed)

    def __init__(self) -> None:
        self.pending: dict[str, dict[str, Any]] = {}

    def key(self, obj: dict[str, Any]) -> str:
        return str(_meta(obj).get("namespace", ""))

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        latest = {
            self.key(obj): (None if event == "DELETED" else obj)
            for event, obj in events
            if _meta(obj).get("name") == liqo.OFFLOADING_NAME
        }
        if not latest:
            return
        managed = self.managed_id
        mine = Namespace.objects.filter(managed_id=managed)
        known = dict(mine.filter(name__in=list(latest)).values_list("name", "offloading_resource_version"))
        changed: dict[str, dict[str, Any] | None] = {}
        for name, obj in latest.items():
            if name not in known:
                if obj is None:
                    self.pending.pop(name, None)
                else:
                    self.pending[name] = obj
                continue
            version = _meta(obj).get("resourceVersion", "") if obj else ""
            if version != known[name] or not relist:
                changed[name] = obj
        self._write(changed, now)
        if not SnapshotState.get(managed).local_cluster_id:
            found = discover_local_cluster_id([obj for obj in latest.values() if obj])
            if found:
                SnapshotState.touch(managed, local_cluster_id=found)

    def _write(self, changed: dict[str, dict[str, Any] | None], now: Any) -> None:
        """What observe_offloading does for one object, for a batch: rows locked in name order, late
        events skipped, drift recorded, then one replace_offloading_rows for all."""
        if not changed:
            return
        managed = self.managed_id
        if SnapshotState.get(managed).last_success_at is None:
            # The first sync learns, it reports nothing.
            replace_offloading_rows(changed, now, history=False, managed=managed)
            return
        rows = {
            n.name: n
            for n in Namespace.objects.select_for_update()
            .filter(managed_id=managed, name__in=list(changed))
            .order_by("name")
        }
        current: dict[str, dict[str, Any] | None] = {}
        for name, obj in changed.items():
            old = rows.get(name)
            if old is None or (obj is not None and _older(obj, old.offloading_resource_version)):  # late event
                continue
            record_drift(old, obj, now)
            current[name] = obj
        replace_offloading_rows(current, now, managed=managed)

    def namespaces_added(self, names: list[str], now: Any) -> None:
        waiting = {name: self.pending.pop(name) for name in names if name in self.pending}
        self._write(dict(waiting), now)

    def relisted(self, seen: set[str], now: Any) -> None:
        offloaded = Namespace.objects.filter(managed_id=self.managed_id).filter(
            Q(offloaded=True) | ~Q(offloading_resource_version="")
        )
        gone = [name for name in offloaded.values_list("name", flat=True) if name not in seen]
        self._write(dict.fromkeys(gone), now)
        self.pending = {name: obj for name, obj in self.pending.items() if name in seen}


class ClusterSync(KindSync):
    """ForeignClusters: the peer and its per-module conditions."""

    kind = "foreignclusters"

    def key(self, obj: dict[str, Any]) -> str:
        return str((obj.get("spec") or {}).get("clusterID") or _meta(obj).get("name", ""))

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        latest = {self.key(obj): (event, obj) for event, obj in events}
        managed = self.managed_id
        mine = Cluster.objects.filter(managed_id=managed)
        versions = dict(mine.filter(cluster_id__in=list(latest)).values_list("cluster_id", "resource_version"))
        rows = [
            cluster_row(obj, now, managed)
            for key, (event, obj) in latest.items()
            if event != "DELETED" and versions.get(key) != _meta(obj).get("resourceVersion", "")
        ]
        Cluster.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["managed", "cluster_id"], update_fields=CLUSTER_FIELDS
        )
        gone = [key for key, (event, _) in latest.items() if event == "DELETED"]
        if gone:
            mine.filter(cluster_id__in=gone).delete()

    def relisted(self, seen: set[str], now: Any) -> None:
        mine = Cluster.objects.filter(managed_id=self.managed_id)
        gone = [cid for cid in mine.values_list("cluster_id", flat=True) if cid not in seen]
        mine.filter(cluster_id__in=gone).delete()


class VirtualNodeState:
    """VirtualNodes and their Nodes, kept in memory (a few hundred at most): a VirtualNode's row needs
    both, and either may change alone."""

    def __init__(self) -> None:
        self.virtual_nodes: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}

    def write(self, keys: list[str] | None, now: Any, managed: ManagedRef = None) -> None:
        """Rewrite the rows of ``keys`` (all VirtualNodes when None) in the snapshot of ``managed``."""
        chosen = self.virtual_nodes if keys is None else {k: self.virtual_nodes[k] for k in keys}
        rows = [virtual_node_row(vn, self.nodes, now, managed) for vn in chosen.values()]
        VirtualNode.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["managed", "namespace", "name"],
            update_fields=VIRTUAL_NODE_FIELDS,
        )


class VirtualNodeSync(KindSync):
    kind = "virtualnodes"

    def __init__(self, state: VirtualNodeState) -> None:
        self.state = state

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        changed, gone = [], []
        for event, obj in events:
            key = self.key(obj)
            if event == "DELETED":
                self.state.virtual_nodes.pop(key, None)
                gone.append(key)
            else:
                self.state.virtual_nodes[key] = obj
                changed.append(key)
        managed = self.managed_id
        self.state.write([k for k in dict.fromkeys(changed) if k in self.state.virtual_nodes], now, managed)
        for key in gone:
            namespace, _, name = key.partition("/")
            VirtualNode.objects.filter(managed_id=managed, namespace=namespace, name=name).delete()

    def relisted(self, seen: set[str], now: Any) -> None:
        self.state.virtual_nodes = {k: v for k, v in self.state.virtual_nodes.items() if k in seen}
        stale = [
            pk
            for pk, ns, name in VirtualNode.objects.filter(managed_id=self.managed_id).values_list(
                "pk", "namespace", "name"
            )
            if f"{ns}/{name}" not in seen
        ]
        VirtualNode.objects.filter(pk__in=stale).delete()


class NodeSync(KindSync):
    """The Nodes of VirtualNodes (``offloading.cluster.kube`` lists only those): their labels reach the rows."""

    kind = "nodes"

    def __init__(self, state: VirtualNodeState) -> None:
        self.state = state

    def key(self, obj: dict[str, Any]) -> str:
        return str(_meta(obj).get("name", ""))

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        names = set()
        for event, obj in events:
            name = self.key(obj)
            names.add(name)
            if event == "DELETED":
                self.state.nodes.pop(name, None)
            else:
                self.state.nodes[name] = obj
        keys = [k for k, vn in self.state.virtual_nodes.items() if _meta(vn).get("name") in names]
        self.state.write(keys, now, self.managed)

    def relisted(self, seen: set[str], now: Any) -> None:
        self.state.nodes = {k: v for k, v in self.state.nodes.items() if k in seen}
        self.state.write(None, now, self.managed)


OFFLOADINGS = OffloadingSync()


def build(managed: ManagedRef = None) -> dict[str, KindSync]:
    """A fresh set of every kind (by kind), writing the snapshot of ``managed`` (None: the default
    cluster): what a watcher of that cluster starts with."""
    virtual_nodes = VirtualNodeState()
    offloadings = OffloadingSync()
    syncs: list[KindSync] = [
        NamespaceSync(offloadings),
        offloadings,
        ClusterSync(),
        VirtualNodeSync(virtual_nodes),
        NodeSync(virtual_nodes),
    ]
    for extra in EXTRA_KINDS:
        syncs += extra()
    for sync in syncs:
        sync.managed = managed
    return {sync.kind: sync for sync in syncs}


def reset() -> None:
    """The default cluster's kinds afresh (what a new watcher process starts with)."""
    global OFFLOADINGS
    SYNCED.clear()
    SYNCED.update(build())
    offloadings = SYNCED[OffloadingSync.kind]
    assert isinstance(offloadings, OffloadingSync)
    OFFLOADINGS = offloadings


reset()
