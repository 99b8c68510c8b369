"""The overview (home page: the fleet at a glance, with a topology picture) and the page of one peer
(its modules, virtual nodes and capacity, the namespaces it hosts and the pods running there)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from offloading.choices import ChangeState
from offloading.inventory_models import KubeEvent, Pod
from offloading.models import ChangeRequest, Cluster, ClusterOffloading, Namespace, SnapshotState, VirtualNode
from offloading.views.common import annotate_inventory

SIZE, CENTER, RADIUS = 640, 320, 240  # the topology picture's square, its centre, the peers' circle


@dataclass
class PeerNode:
    cluster: Cluster
    x: float
    y: float
    label_x: float
    label_y: float
    anchor: str
    namespaces: int
    pods: int
    healthy: bool
    width: float  # the edge's stroke width, by offloaded namespaces


def unhealthy(cluster: Cluster) -> bool:
    """A peer whose offloading module or network is down (a consumer-only peer, whose offloading module
    is Disabled, is not unhealthy: it offers nothing to offload to)."""
    return "Unhealthy" in (cluster.offloading_status, cluster.networking_status)


def topology(clusters: list[Cluster], hosted: dict[str, int], pods: dict[str, int]) -> list[PeerNode]:
    """The peers on a circle around the local cluster (readable at 50 peers: labels outside the circle,
    anchored away from the centre)."""
    most = max(hosted.values(), default=0) or 1
    nodes = []
    for i, cluster in enumerate(clusters):
        angle = 2 * math.pi * i / max(len(clusters), 1) - math.pi / 2
        x, y = CENTER + RADIUS * math.cos(angle), CENTER + RADIUS * math.sin(angle)
        lx, ly = CENTER + (RADIUS + 22) * math.cos(angle), CENTER + (RADIUS + 22) * math.sin(angle)
        anchor = "start" if math.cos(angle) > 0.3 else "end" if math.cos(angle) < -0.3 else "middle"
        count = hosted.get(cluster.cluster_id, 0)
        healthy = not unhealthy(cluster)
        nodes.append(
            PeerNode(
                cluster, round(x, 1), round(y, 1), round(lx, 1), round(ly, 1), anchor, count,
                pods.get(cluster.cluster_id, 0), healthy, round(1 + 7 * count / most, 1) if count else 0.6,
            )
        )  # fmt: skip
    return nodes


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    clusters = list(Cluster.objects.all())
    hosted = dict(
        ClusterOffloading.objects.filter(selected=True).values_list("cluster_id").annotate(n=Count("id")).order_by()
    )
    pods = dict(
        Pod.objects.filter(phase="Running")
        .exclude(cluster_id="")
        .values_list("cluster_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    phases = dict(
        Namespace.objects.filter(offloaded=True).values_list("offloading_phase").annotate(n=Count("id")).order_by()
    )
    troubled = list(
        Namespace.objects.filter(offloaded=True)
        .exclude(offloading_phase__in=["Ready", "NoClusterSelected"])
        .defer("offloading_status")
        .order_by("offloading_phase", "name")[:20]
    )
    annotate_inventory(troubled)
    context = {
        "state": SnapshotState.get(),
        "peers": topology(clusters, hosted, pods),
        "size": SIZE,
        "center": CENTER,
        "healthy_peers": sum(1 for c in clusters if not unhealthy(c)),
        "unhealthy_peers": [c for c in clusters if unhealthy(c)],
        "phases": sorted(phases.items()),
        "not_offloaded": Namespace.objects.filter(offloaded=False).count(),
        "troubled": troubled,
        "failed_changes": ChangeRequest.objects.filter(state__in=[ChangeState.FAILED, ChangeState.CONFLICT])[:10],
        "recent_changes": ChangeRequest.objects.all()[:10],
        "warnings": KubeEvent.objects.filter(type="Warning").order_by("-last_time")[:10],
        "pods_remote": sum(pods.values()),
    }
    return render(request, "offloading/overview.html", context)


@login_required
@require_GET
def cluster_detail(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, cluster_id=cluster_id)
    nodes = list(VirtualNode.objects.filter(cluster_id=cluster_id))
    capacity = {"cpu": 0.0, "memory": 0.0, "pods": 0.0}
    from offloading import kube

    for node in nodes:
        for key in capacity:
            capacity[key] += kube.quantity((node.capacity or {}).get(key))
    hosted = (
        ClusterOffloading.objects.filter(cluster_id=cluster_id).select_related("namespace").order_by("namespace__name")
    )
    running = Pod.objects.filter(cluster_id=cluster_id)
    used = running.filter(phase="Running").aggregate(cpu=Sum("cpu_millis"), memory=Sum("memory_bytes"), n=Count("id"))
    share = {
        "cpu": _share((used["cpu"] or 0) / 1000, capacity["cpu"]),
        "memory": _share(used["memory"] or 0, capacity["memory"]),
        "pods": _share(used["n"] or 0, capacity["pods"]),
    }
    context = {
        "cluster": cluster,
        "nodes": nodes,
        "capacity": capacity,
        "used": used,
        "share": share,
        "hosted": hosted[:500],
        "hosted_selected": hosted.filter(selected=True).count(),
        "pods": running.order_by("namespace", "name")[:300],
        "pending": running.filter(~Q(phase="Running")).count(),
    }
    return render(request, "offloading/cluster_detail.html", context)


def _share(used: float, total: float) -> int | None:
    return round(100 * used / total) if total else None
