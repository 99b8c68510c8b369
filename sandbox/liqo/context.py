"""What the simulated Liqo controllers share: the API server, the store, the work queue, the faults and
the peers; plus the typed records they pass to each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from liqo_rules import constants as c
from liqo_rules.peers import ROLE_PROVIDER, is_local_namespace_map
from sandbox.apicommon import PATCH_MERGE, now_iso
from sandbox.apiserver import ApiServer
from sandbox.faults import Faults
from sandbox.kinds import NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS, NAMESPACES, Kind
from sandbox.objects import Obj
from sandbox.runtime import Controller
from sandbox.store import Store

# The work-queue names of the simulated controllers.
OFFLOADING = "offloading"
# Sandbox.start converges a large fleet in phases: while SELECT_PHASE holds, offloadings choose their
# clusters without writing (the desired mappings are patched once per map), then the providers answer,
# then STATUS_PHASE writes each status once. Outside the start, bulk_phase is None.
SELECT_PHASE = "select"
STATUS_PHASE = "status"
PROVIDER = "provider"
VIRTUAL_NODE = "virtualnode"
PODS = "pods"
NAMESPACE = "namespace"
PEER = "peer"


def is_virtual_node(node: Obj | None) -> bool:
    """Whether a Node is one of Liqo's virtual nodes (labelled liqo.io/type=virtual-node)."""
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(c.VIRTUAL_NODE_TYPE_LABEL) == c.VIRTUAL_NODE_TYPE_VALUE


class Mapping(TypedDict):
    """One entry of a NamespaceMap's status.currentMapping."""

    remoteNamespace: str
    phase: str


class Condition(TypedDict):
    """A status condition of a ForeignCluster module, a VirtualNode or a Node."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


@dataclass
class Peer:
    """A provider (or consumer) cluster: its id, its own namespace store and its simulated behaviour."""

    cluster_id: str
    role: str = ROLE_PROVIDER
    namespace_delay: float = 0.0  # extra seconds before this provider processes its NamespaceMap
    offloading_healthy: bool = True
    # False: Liqo's controller cannot patch this peer's NamespaceMap (refused by the API server): the
    # error only reaches its log, as in Liqo (issue 27).
    namespace_map_writable: bool = True
    store: Store = field(default_factory=Store)
    # `<namespace>/<name>` of our NamespaceMap as replicated in this peer (its tenant namespace for us,
    # named after the peer), which annotates the namespaces it creates for us; empty: the local map's.
    # A sandbox domain sets it, and `store` to the peer's own API store (sandbox.domain).
    map_ref: str = ""
    # True when the peer is a running sandbox with its own namespace controller (a domain): a deleted
    # twin is left Terminating for it to empty and finalize, instead of being removed from its store.
    finalizes_namespaces: bool = False

    def namespaces(self) -> dict[str, Obj]:
        return {o["metadata"]["name"]: o for o in self.store.items(NAMESPACES)}

    def add_namespace(self, name: str, annotations: dict[str, str] | None = None) -> None:
        """Create a namespace directly in this provider cluster (e.g. to provoke an EnforceSameName conflict)."""
        self.store.create(
            NAMESPACES,
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "creationTimestamp": now_iso(), "annotations": annotations or {}},
                "status": {"phase": "Active"},
            },
        )


class LiqoContext:
    """The state the simulated controllers share; `LiqoSimulation` is one, with the controllers wired in."""

    def __init__(
        self,
        server: ApiServer,
        controller: Controller,
        faults: Faults,
        local_cluster_id: str,
        controller_delay: float = 0.0,
    ) -> None:
        self.server = server
        self.store = server.store
        self.controller = controller
        self.faults = faults
        self.local_cluster_id = local_cluster_id
        self.controller_delay = controller_delay
        self.peers: dict[str, Peer] = {}
        # Reconcile errors Liqo's controller only logs (namespace, message), the newest 100 (issue 27).
        self.swallowed: list[tuple[str, str]] = []
        self.bulk_phase: str | None = None
        self.offloadings_stale = False
        # How each provider treats this cluster's tenant there (sandbox.liqo.resources): cordoned, quota.
        self.provider_policies: dict[str, Any] = {}
        self.pending_desired: dict[str, dict[str, str | None]] = {}  # cluster id -> desiredMapping (SELECT_PHASE)

    def provider_delay(self, cluster_id: str) -> float:
        peer = self.peers.get(cluster_id)
        return self.controller_delay + (peer.namespace_delay if peer else 0.0)

    def enqueue(self, queue: str, key: str, delay: float | None = None) -> None:
        self.controller.enqueue(queue, key, self.controller_delay if delay is None else delay)

    def enqueue_provider(self, cluster_id: str) -> None:
        self.controller.enqueue(PROVIDER, cluster_id, self.provider_delay(cluster_id))

    def enqueue_all_offloadings(self, delay: float | None = None) -> None:
        if self.bulk_phase:
            self.offloadings_stale = True  # Sandbox.start passes over every offloading once per phase
            return
        self.enqueue_offloadings(delay)

    def enqueue_offloadings(self, delay: float | None = None) -> None:
        for obj in self.store.items(NAMESPACE_OFFLOADINGS):
            if obj["metadata"]["name"] == c.OFFLOADING_NAME:
                self.enqueue(OFFLOADING, obj["metadata"]["namespace"], delay)

    def flush_desired(self) -> None:
        """Write the desired mappings gathered during SELECT_PHASE, one merge patch per NamespaceMap."""
        maps = self.local_namespace_maps()
        for cluster_id, desired in sorted(self.pending_desired.items()):
            nm = maps.get(cluster_id)
            if nm is not None:
                meta = nm["metadata"]
                self.patch(NAMESPACE_MAPS, meta["namespace"], meta["name"], {"spec": {"desiredMapping": desired}})
        self.pending_desired = {}

    def local_namespace_maps(self) -> dict[str, Obj]:
        """clusterID -> NamespaceMap, for the maps Liqo's controller counts (a.4)."""
        return {
            nm["metadata"]["labels"][c.REMOTE_CLUSTER_ID_LABEL]: nm
            for nm in self.store.items(NAMESPACE_MAPS)
            if is_local_namespace_map(nm)
        }

    def patch(self, kind: Kind, namespace: str, name: str, body: dict[str, Any], subresource: str = "") -> Obj:
        """A merge patch written as Liqo's controller-manager."""
        return self.server.patch(
            kind, namespace, name, PATCH_MERGE, body, manager=c.CONTROLLER_MANAGER, subresource=subresource
        ).obj

    def write(self, kind: Kind, obj: Obj, subresource: str = "") -> Obj:
        """An update (PUT) written as Liqo's controller-manager."""
        meta = obj["metadata"]
        return self.server.update(
            kind,
            meta.get("namespace") or "",
            meta["name"],
            obj,
            manager=c.CONTROLLER_MANAGER,
            subresource=subresource,
        ).obj

    def create(self, kind: Kind, obj: Obj) -> Obj:
        return self.server.create(kind, obj["metadata"].get("namespace") or "", obj, manager=c.CONTROLLER_MANAGER).obj
