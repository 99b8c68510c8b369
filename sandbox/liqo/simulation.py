"""The Liqo simulation: plugs admission into the API server, registers the simulated controllers with the
work queue, and turns store changes and fault changes into work (called under the store lock: only
enqueue here)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from liqo_rules import constants as c
from sandbox.apiserver import ApiServer
from sandbox.kinds import NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS, NAMESPACES, NODES, PODS, VIRTUAL_NODES, Kind
from sandbox.liqo import admission
from sandbox.liqo import context as q
from sandbox.liqo.context import LiqoContext, Peer, is_virtual_node
from sandbox.liqo.desired import DESIRED, GROUP_FROM, linger
from sandbox.liqo.namespaces import NamespaceController
from sandbox.liqo.offloading_controller import OffloadingController
from sandbox.liqo.peers import PeerController, foreign_cluster_status, virtual_node_status
from sandbox.liqo.pods import PodController
from sandbox.liqo.provider import ProviderController
from sandbox.liqo.virtual_nodes import VirtualNodeController
from sandbox.runtime import Controller
from sandbox.store import Obj

if TYPE_CHECKING:
    from sandbox.faults import Faults, FaultSettings


class LiqoSimulation(LiqoContext):
    def __init__(
        self,
        server: ApiServer,
        controller: Controller,
        faults: Faults,
        local_cluster_id: str,
        controller_delay: float = 0.0,
    ) -> None:
        super().__init__(server, controller, faults, local_cluster_id, controller_delay)
        self._down: set[str] = set()
        self._controller_down = False
        admission.install(server)
        self.store.add_listener(self.on_change)
        faults.add_listener(self.on_faults)
        self.offloadings = OffloadingController(self)
        controller.register(q.OFFLOADING, self.offloadings.reconcile)
        controller.register(DESIRED, self.offloadings.writes.flush)  # its desiredMapping writes, grouped
        self._provider = ProviderController(self)
        self._provider_cost: dict[str, float] = {}  # cluster id -> how long its provider's last answer took
        controller.register(q.PROVIDER, self._provide)
        controller.register(q.VIRTUAL_NODE, VirtualNodeController(self).reconcile)
        controller.register(q.PODS, PodController(self).reconcile)
        controller.register(q.NAMESPACE, NamespaceController(self).reconcile)
        controller.register(q.PEER, PeerController(self).reconcile)

    def _provide(self, cluster_id: str) -> float | None:
        started = time.thread_time()
        try:
            return self._provider.reconcile(cluster_id)
        finally:
            self._provider_cost[cluster_id] = time.thread_time() - started

    def foreign_cluster_status(self, peer: Peer, up: bool = True) -> dict[str, Any]:
        return foreign_cluster_status(peer, self.local_cluster_id, up)

    def virtual_node_status(self, peer: Peer, up: bool = True) -> dict[str, Any]:
        return virtual_node_status(peer, up)

    def set_peer(
        self,
        cluster_id: str,
        *,
        offloading_healthy: bool | None = None,
        namespaces: list[str] | tuple[str, ...] = (),
        namespace_map_writable: bool | None = None,
    ) -> None:
        """Turn a peer's offloading module healthy or not (its ForeignCluster, VirtualNode and Node follow);
        create namespaces directly in it (e.g. to take the name a remote namespace needs); let Liqo's
        controller patch its NamespaceMap or not (a refused patch is only logged, as in Liqo)."""
        peer = self.peers.get(cluster_id)
        if peer is None:
            raise ValueError(f"no peer {cluster_id!r}; peers: {', '.join(sorted(self.peers))}")
        for name in namespaces:
            if name not in peer.namespaces():
                peer.add_namespace(name)
        if namespace_map_writable is not None:
            peer.namespace_map_writable = namespace_map_writable
        if offloading_healthy is not None and offloading_healthy != peer.offloading_healthy:
            peer.offloading_healthy = offloading_healthy
            self.enqueue(q.PEER, cluster_id, 0.0)

    def on_change(self, kind: Kind, event: str, obj: Obj, prev: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        if self.bulk_phase and kind in (NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS) and event != "ADDED":
            return  # the start converges these in phases (Sandbox.start)
        if kind is NAMESPACE_OFFLOADINGS:
            if meta.get("name") == c.OFFLOADING_NAME:
                self.enqueue(q.OFFLOADING, meta["namespace"])
                self.enqueue(q.PODS, meta["namespace"])
        elif kind is NAMESPACE_MAPS:
            self._namespace_map_changed(event, obj, prev)
            return
        elif kind is VIRTUAL_NODES:
            self.enqueue_all_offloadings()
            cluster_id = (obj.get("spec") or {}).get("clusterID") or ""
            if cluster_id:
                self.enqueue(q.VIRTUAL_NODE, cluster_id)
        elif kind is NODES:
            if is_virtual_node(obj) or is_virtual_node(prev):
                self.enqueue_all_offloadings()
        elif kind is NAMESPACES:
            if meta.get("deletionTimestamp"):
                self.enqueue(q.NAMESPACE, meta["name"])
            if _scheduling(obj) != _scheduling(prev):
                self.enqueue(q.PODS, meta["name"])  # Liqo's pod webhook acts where this label is set
        elif kind is PODS and event == "ADDED":  # unbound: to schedule; bound: its virtual kubelet acts
            self.enqueue(q.PODS, meta["namespace"])
        if kind.namespaced and event == "DELETED":
            namespace = meta.get("namespace") or ""
            ns = self.store.get(NAMESPACES, "", namespace)
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self.enqueue(q.NAMESPACE, namespace)

    def _namespace_map_changed(self, event: str, obj: Obj, prev: Obj | None) -> None:
        cluster_id = ((obj.get("metadata") or {}).get("labels") or {}).get(c.REMOTE_CLUSTER_ID_LABEL, "")
        if event in ("ADDED", "DELETED"):
            self.enqueue_all_offloadings()
            if cluster_id and event == "ADDED":
                self.enqueue_provider(cluster_id)
            return
        if cluster_id and _desired(prev) != _desired(obj):
            # The provider answers with the whole map (its cost grows with the map): a large one waits
            # for more entries, as the desiredMapping writes do (sandbox.liqo.desired).
            large = len(_desired(obj)) >= GROUP_FROM
            wait = linger(self._provider_cost.get(cluster_id, 0.0)) if large else 0.0
            self.controller.enqueue(q.PROVIDER, cluster_id, self.provider_delay(cluster_id) + wait)
        old_current, new_current = _current(prev), _current(obj)
        for ns in set(old_current) | set(new_current):
            if (ns in old_current) != (ns in new_current) or (old_current.get(ns) or {}).get("phase") != (
                new_current.get(ns) or {}
            ).get("phase"):
                self.enqueue(q.OFFLOADING, ns)

    def on_faults(self, settings: FaultSettings) -> None:
        if self._controller_down and not settings.controller_down:
            self.enqueue_all_offloadings(0.0)  # back up: it resyncs every NamespaceOffloading
        self._controller_down = settings.controller_down
        down = set(settings.peer_down) | self.faults.unreachable()  # a domain's outages too
        changed = down ^ self._down
        self._down = down
        for cluster_id in changed:
            if cluster_id in self.peers:
                self.enqueue(q.PEER, cluster_id, 0.0)
                if cluster_id not in down:
                    self.enqueue_provider(cluster_id)


def _scheduling(ns: Obj | None) -> str | None:
    return (((ns or {}).get("metadata") or {}).get("labels") or {}).get(c.SCHEDULING_LABEL)


def _desired(nm: Obj | None) -> dict[str, Any]:
    return ((nm or {}).get("spec") or {}).get("desiredMapping") or {}


def _current(nm: Obj | None) -> dict[str, Any]:
    return ((nm or {}).get("status") or {}).get("currentMapping") or {}
