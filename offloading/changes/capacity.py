"""Room on the peers, from the snapshot: what each peer's virtual nodes offer (``spec.resourceQuota.hard``,
which Liqo makes the virtual Node's capacity and allocatable) and what the running pods of our offloaded
namespaces request there. A peer is *nearly full* when the running pods request at least
``NEARLY_FULL_PERCENT`` of its allocatable CPU, memory or pods.

The quota a VirtualNode carries is what the provider granted to this cluster, and every pod on a
virtual node is one of ours (only offloaded namespaces run there), so requested / allocatable is the
share of the grant in use. Two queries whatever the number of peers (virtual nodes, one aggregate of
pods grouped by peer): the peer page, the offload preview and the bulk preview use the same numbers.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Sum

from offloading import kube
from offloading.inventory_models import Pod
from offloading.models import VirtualNode

NEARLY_FULL_PERCENT = 80
RESOURCES = ("cpu", "memory", "pods")


@dataclass
class Room:
    """One peer: allocatable and requested per resource (CPU in cores, memory in bytes, pods)."""

    cluster_id: str
    allocatable: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    requested: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))

    @property
    def percent(self) -> dict[str, int | None]:
        """Requested as a share of allocatable, per resource; None when the peer declares none."""
        return {
            key: round(100 * self.requested[key] / self.allocatable[key]) if self.allocatable[key] else None
            for key in RESOURCES
        }

    @property
    def full(self) -> list[str]:
        """The resources at or over the threshold."""
        return [key for key, share in self.percent.items() if share is not None and share >= NEARLY_FULL_PERCENT]

    @property
    def nearly_full(self) -> bool:
        return bool(self.full)

    @property
    def threshold(self) -> int:
        return NEARLY_FULL_PERCENT

    @property
    def known(self) -> bool:
        """Whether the peer declares any capacity at all (a virtual node with a quota)."""
        return any(self.allocatable.values())

    @property
    def requested_cpu_millis(self) -> int:
        return round(self.requested["cpu"] * 1000)

    def as_api(self) -> dict[str, Any]:
        return {
            "clusterId": self.cluster_id,
            "allocatable": {key: _number(value) for key, value in self.allocatable.items()},
            "requested": {key: _number(value) for key, value in self.requested.items()},
            "percent": self.percent,
            "nearlyFull": self.nearly_full,
            "full": self.full,
        }


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 3)


def room_of(cluster_id: str, quotas: list[dict[str, Any]], running: dict[str, int] | None = None) -> Room:
    """A peer's room from its virtual nodes' quotas (``{"cpu": "4", "memory": "8Gi", "pods": "110"}``, one
    per virtual node, added up) and the running pods there: ``{"cpu_millis", "memory_bytes", "pods"}``."""
    room = Room(cluster_id)
    for quota in quotas:
        for key in RESOURCES:
            room.allocatable[key] += kube.quantity((quota or {}).get(key))
    running = running or {}
    room.requested["cpu"] = (running.get("cpu_millis") or 0) / 1000
    room.requested["memory"] = float(running.get("memory_bytes") or 0)
    room.requested["pods"] = float(running.get("pods") or 0)
    return room


def rooms(cluster_ids: Collection[str] | None = None) -> dict[str, Room]:
    """The room of each peer in ``cluster_ids`` (every peer with a virtual node when None), in two
    queries; a peer without a virtual node has an empty room (``known`` is False)."""
    nodes = VirtualNode.objects.all()
    pods = Pod.objects.filter(phase="Running").exclude(cluster_id="")
    if cluster_ids is not None:
        nodes, pods = nodes.filter(cluster_id__in=list(cluster_ids)), pods.filter(cluster_id__in=list(cluster_ids))
    quotas: dict[str, list[dict[str, Any]]] = {cid: [] for cid in cluster_ids or ()}
    for cluster_id, capacity in nodes.values_list("cluster_id", "capacity"):
        quotas.setdefault(cluster_id, []).append(capacity or {})
    running = {
        row["cluster_id"]: {"cpu_millis": row["cpu"], "memory_bytes": row["memory"], "pods": row["n"]}
        for row in pods.values("cluster_id")
        .annotate(cpu=Sum("cpu_millis"), memory=Sum("memory_bytes"), n=Count("id"))
        .order_by()
    }
    return {cid: room_of(cid, quotas.get(cid, []), running.get(cid)) for cid in sorted(set(quotas) | set(running))}
