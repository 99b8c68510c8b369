"""Room on the peers, from the snapshot: what each peer's virtual nodes offer (``spec.resourceQuota.hard``,
which Liqo makes the virtual Node's capacity and allocatable) and what the running pods of our offloaded
namespaces request there. A peer is *nearly full* when the running pods request at least
``NEARLY_FULL_PERCENT`` of its allocatable CPU, memory or pods.

The quota a VirtualNode carries is what the provider granted to this cluster, and every pod on a
virtual node is one of ours (only offloaded namespaces run there), so requested / allocatable is the
share of the grant in use. Two queries whatever the number of peers (virtual nodes, one aggregate of
pods grouped by peer), one when the caller has read the virtual nodes' capacities already (the offload
preview): the peer page, the offload preview and the bulk preview use the same numbers.

A quota is read from the column's JSON text through ``quota_of``, cached by that text: the live preview
asks for the same peers' quotas on every keystroke, and a cache keyed by the content is never stale.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from django.db.models import Count, Sum, TextField
from django.db.models.functions import Cast

from offloading.cluster import kube
from offloading.models import VirtualNode
from offloading.models.fleet import ManagedRef
from offloading.models.inventory import Pod

NEARLY_FULL_PERCENT = 80
RESOURCES = ("cpu", "memory", "pods")
# One virtual node's quota as numbers, in the order of RESOURCES: CPU in cores, memory in bytes, pods.
Quota = tuple[float, float, float]


@dataclass
class Room:
    """One peer: allocatable and requested per resource (CPU in cores, memory in bytes, pods). Its
    figures are set when it is made and not changed after: the shares are computed once."""

    cluster_id: str
    allocatable: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    requested: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))

    @cached_property
    def percent(self) -> dict[str, int | None]:
        """Requested as a share of allocatable, per resource; None when the peer declares none."""
        requested, allocatable = self.requested, self.allocatable
        return {key: round(100 * requested[key] / allocatable[key]) if allocatable[key] else None for key in RESOURCES}

    @cached_property
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


def _quota(quota: Any) -> Quota:
    quota = quota if isinstance(quota, dict) else {}
    cpu, memory, pods = (kube.quantity(quota.get(key)) for key in RESOURCES)
    return cpu, memory, pods


@lru_cache(maxsize=4096)
def quota_of(capacity_json: str | None) -> Quota:
    """A virtual node's quota from the JSON text of its ``capacity`` column, cached by that text (an
    immutable tuple, shared between requests); unreadable JSON or quantities count as 0."""
    try:
        return _quota(json.loads(capacity_json) if capacity_json else None)
    except ValueError:
        return 0.0, 0.0, 0.0


def _room(cluster_id: str, quotas: Iterable[Quota], running: dict[str, int] | None) -> Room:
    cpu = memory = pods = 0.0
    for quota in quotas:
        cpu, memory, pods = cpu + quota[0], memory + quota[1], pods + quota[2]
    running = running or {}
    requested = {
        "cpu": (running.get("cpu_millis") or 0) / 1000,
        "memory": float(running.get("memory_bytes") or 0),
        "pods": float(running.get("pods") or 0),
    }
    return Room(cluster_id, {"cpu": cpu, "memory": memory, "pods": pods}, requested)


def room_of(cluster_id: str, quotas: list[dict[str, Any]], running: dict[str, int] | None = None) -> Room:
    """A peer's room from its virtual nodes' quotas (``{"cpu": "4", "memory": "8Gi", "pods": "110"}``, one
    per virtual node, added up) and the running pods there: ``{"cpu_millis", "memory_bytes", "pods"}``."""
    return _room(cluster_id, (_quota(quota) for quota in quotas), running)


def rooms(
    cluster_ids: Collection[str] | None = None,
    capacities: Mapping[str, Sequence[str | None]] | None = None,
    managed: ManagedRef = None,
) -> dict[str, Room]:
    """The room of each peer in ``cluster_ids`` (every peer with a virtual node when None), in two
    queries; a peer without a virtual node has an empty room (``known`` is False). ``capacities``: the
    JSON text of each peer's virtual nodes' ``capacity``, when the caller has read them (one query then).
    ``managed``: the managed cluster whose peers these are (None: the default one)."""
    pods = Pod.objects.of(managed).filter(phase="Running").exclude(cluster_id="")
    if cluster_ids is not None:
        pods = pods.filter(cluster_id__in=list(cluster_ids))
    texts: dict[str, list[str | None]] = {cid: [] for cid in cluster_ids or ()}
    if capacities is not None:
        for cluster_id in capacities if cluster_ids is None else cluster_ids:
            texts.setdefault(cluster_id, []).extend(capacities.get(cluster_id, ()))
    else:
        nodes = VirtualNode.objects.of(managed)
        if cluster_ids is not None:
            nodes = nodes.filter(cluster_id__in=list(cluster_ids))
        for cluster_id, text in nodes.values_list("cluster_id", Cast("capacity", TextField())):
            texts.setdefault(cluster_id, []).append(text)
    running = {
        row["cluster_id"]: {"cpu_millis": row["cpu"], "memory_bytes": row["memory"], "pods": row["n"]}
        for row in pods.values("cluster_id")
        .annotate(cpu=Sum("cpu_millis"), memory=Sum("memory_bytes"), n=Count("id"))
        .order_by()
    }
    return {
        cid: _room(cid, map(quota_of, texts.get(cid, ())), running.get(cid))
        for cid in sorted(set(texts) | set(running))
    }


_BINARY_UNITS = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def binary_bytes(value: Any) -> str:
    """A memory size in Kubernetes' binary units, as a quota is written: ``128Gi``, ``1.5Gi``, ``512Mi``
    (one decimal at most; under 1 Ki in bytes, ``512B``). Never decimal GB next to a ``Gi`` quota."""
    try:
        size = float(value or 0)
    except (TypeError, ValueError):
        return ""
    if abs(size) < 1024:
        return f"{size:.0f}B"
    unit = ""
    for unit in _BINARY_UNITS:
        size /= 1024
        # 1023.96Mi would print as 1024Mi: move on to the next unit from where it rounds to 1024.
        if abs(round(size, 1)) < 1024 or unit == _BINARY_UNITS[-1]:
            break
    text = f"{size:.1f}".removesuffix(".0")
    return f"{text}{unit}"
