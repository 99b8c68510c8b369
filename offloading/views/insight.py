"""The overview (home page: the fleet at a glance, with a topology picture) and the page of one peer
(its modules, virtual nodes and capacity, the namespaces it hosts and the pods running there)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from django.contrib.auth.decorators import login_required
from django.db.models import Case, Count, IntegerField, Q, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.views.decorators.http import require_GET

from access import roles
from liqo_rules import constants as liqo
from liqo_rules.peers import MODULE_UNHEALTHY
from offloading.alerts import rules as alerts
from offloading.choices import ChangeState
from offloading.models import ChangeRequest, Cluster, ClusterOffloading, Namespace, SnapshotState, VirtualNode
from offloading.models.fleet import current_managed
from offloading.models.inventory import KubeEvent, Pod
from offloading.switcher import cluster_reverse
from offloading.views.common import annotate_inventory, capped, split_labels
from offloading.whatif.capacity import rooms

SIZE, CENTER, RADIUS = 640, 320, 240  # the topology picture's square, its centre, the peers' circle
# From this many peers on, horizontal labels would collide near the top and bottom of the circle: the
# labels run along the radius instead, around a smaller circle that leaves room for 18 characters.
RADIAL_FROM, RADIAL_RADIUS = 13, 175
HOSTED_SHOWN = 50  # rows of hosted namespaces on a peer's page; the namespace list filtered on it has all
POD_ROWS = 300  # a page of the pods running on a peer
ATTENTION_ROWS, RECENT_ROWS = 20, 10  # the overview's troubled namespaces; its failed and recent changes, warnings


@dataclass
class PeerNode:
    cluster: Cluster
    x: float
    y: float
    label_x: float
    label_y: float
    anchor: str
    rotate: float  # degrees: a radial label is turned to follow its radius (0: horizontal)
    namespaces: int
    pods: int
    healthy: bool
    width: float  # the edge's stroke width, by offloaded namespaces
    labelled: bool = True  # whether its name is written (past ~60 peers, one in LABEL_EVERY; always when unhealthy)
    href: str = ""  # its page (the view sets it: in the request's managed cluster)


def unhealthy(cluster: Cluster) -> bool:
    """A peer whose offloading module or network is down (a consumer-only peer, whose offloading module
    is Disabled, is not unhealthy: it offers nothing to offload to)."""
    return MODULE_UNHEALTHY in (cluster.offloading_status, cluster.networking_status)


LABEL_SIZE = 12  # the peers' names: never smaller (on a phone the picture scrolls rather than shrinks)


def ring(count: int) -> tuple[float, float, float]:
    """The peers' circle radius, their node radius and their label font size for ``count`` peers."""
    if count < RADIAL_FROM:
        return RADIUS, 15, LABEL_SIZE
    return RADIAL_RADIUS, 9 if count <= 60 else 6, LABEL_SIZE


def label_every(count: int) -> int:
    """Write one name in this many around the circle: 1 while 12-unit labels along the radius fit side
    by side (about 60 peers), more past that (the others are named on hover, and in the peer list)."""
    if count < RADIAL_FROM:
        return 1
    spacing = 2 * math.pi * RADIAL_RADIUS / count  # between two neighbours, along the circle
    return max(1, math.ceil(LABEL_SIZE / (1.0 * spacing) - 1e-9)) if spacing < LABEL_SIZE else 1


def topology(clusters: list[Cluster], hosted: dict[str, int], pods: dict[str, int]) -> list[PeerNode]:
    """The peers on a circle around the local cluster, labels outside it: horizontal and anchored away
    from the centre for a few peers, along their radius from RADIAL_FROM peers (readable at 50)."""
    most = max(hosted.values(), default=0) or 1
    radius, node_radius, _size = ring(len(clusters))
    radial = len(clusters) >= RADIAL_FROM
    every = label_every(len(clusters))
    nodes = []
    for i, cluster in enumerate(clusters):
        angle = 2 * math.pi * i / max(len(clusters), 1) - math.pi / 2
        cos, sin = math.cos(angle), math.sin(angle)
        x, y = CENTER + radius * cos, CENTER + radius * sin
        out = radius + node_radius + (6 if radial else 7)
        lx, ly = CENTER + out * cos, CENTER + out * sin
        if radial:  # read from the centre outwards on the right, towards it on the left (never upside down)
            anchor = "start" if cos >= -1e-9 else "end"
            turned = math.degrees(angle) + (0 if anchor == "start" else 180)
            rotate = (turned + 180) % 360 - 180
        else:
            anchor = "start" if cos > 0.3 else "end" if cos < -0.3 else "middle"
            rotate = 0.0
        count = hosted.get(cluster.cluster_id, 0)
        nodes.append(
            PeerNode(
                cluster,
                round(x, 1),
                round(y, 1),
                round(lx, 1),
                round(ly, 1),
                anchor,
                round(rotate, 1),
                count,
                pods.get(cluster.cluster_id, 0),
                not unhealthy(cluster),
                round(1 + 7 * count / most, 1) if count else 0.6,
                i % every == 0 or unhealthy(cluster),
            )
        )
    return nodes


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


def draw_peers(
    peers: list[PeerNode], node_radius: float, label_size: float
) -> tuple[SafeString, SafeString, SafeString]:
    """The topology's edges and its peers linked to their pages, as SVG, and the list of the peers that
    stands for the picture on a phone (items of its ``<ul>``). Drawn here rather than in the
    template: at 200 peers its ~3,000 lookups, localisations and escapes of numbers were most of the
    overview's render (issue 30). Numbers are written as Python writes them (SVG coordinates must not
    follow a locale's decimal comma); every string is escaped."""
    edges, marks, items = [], [], []
    for p in peers:
        name, bad = escape(p.cluster.cluster_id), "" if p.healthy else " bad"
        idle = "" if p.namespaces else " idle"
        edges.append(
            f'<line x1="{CENTER}" y1="{CENTER}" x2="{p.x}" y2="{p.y}" stroke-width="{p.width}" class="edge{bad}{idle}"/>'
        )
        count = (
            f'<text x="{p.x}" y="{p.y}" text-anchor="middle" dominant-baseline="middle" class="peer-count">{p.pods}</text>'
            if p.pods
            else ""
        )
        label = ""
        if p.labelled:
            turn = f' transform="rotate({p.rotate} {p.label_x} {p.label_y})"' if p.rotate else ""
            label = (
                f'<text x="{p.label_x}" y="{p.label_y}" text-anchor="{escape(p.anchor)}" dominant-baseline="middle"'
                f' font-size="{label_size}"{turn} class="peer-label{bad}">'
                f"{escape(Truncator(p.cluster.cluster_id).chars(18))}</text>"
            )
        status = escape(p.cluster.offloading_status or "unknown")
        marks.append(
            f'<a href="{escape(p.href)}"><title>{name}: {p.namespaces} offloaded namespace{_plural(p.namespaces)},'
            f" {p.pods} pod{_plural(p.pods)} running; offloading {status}</title>"
            f'<circle cx="{p.x}" cy="{p.y}" r="{node_radius}" class="peer{bad}"/>{count}{label}</a>'
        )
        health = '<span class="badge ok">healthy</span>' if p.healthy else '<span class="badge bad">unhealthy</span>'
        items.append(
            f'<li><a href="{escape(p.href)}">{name}</a> {health} <span class="small muted">{p.namespaces}'
            f" namespace{_plural(p.namespaces)} · {p.pods} pod{_plural(p.pods)}</span></li>"
        )
    return SafeString("".join(edges)), SafeString("".join(marks)), SafeString("".join(items))


TENANT_TWINS_SHOWN = 200  # a peer's page lists this many of the twins it made here


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    managed = current_managed(request)
    # What the picture and the health line read of each peer (not its modules' JSON, 200 times).
    clusters = list(Cluster.objects.of(managed).only("cluster_id", "offloading_status", "networking_status"))
    hosted = dict(
        ClusterOffloading.objects.of(managed)
        .filter(selected=True)
        .values_list("cluster_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    pods = dict(
        Pod.objects.of(managed)
        .filter(phase="Running")
        .exclude(cluster_id="")
        .values_list("cluster_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    phases = dict(
        Namespace.objects.of(managed)
        .filter(offloaded=True)
        .values_list("offloading_phase")
        .annotate(n=Count("id"))
        .order_by()
    )
    troubled_all = (
        Namespace.objects.of(managed)
        .filter(offloaded=True)
        .exclude(offloading_phase__in=["Ready", "NoClusterSelected"])
    )
    troubled = list(troubled_all.defer("offloading_status").order_by("offloading_phase", "name")[:ATTENTION_ROWS])
    annotate_inventory(troubled, managed)
    failed = ChangeRequest.objects.of(managed).filter(state__in=[ChangeState.FAILED, ChangeState.CONFLICT])
    warnings = KubeEvent.objects.of(managed).filter(type="Warning").order_by("-last_time")
    peers = topology(clusters, hosted, pods)
    for peer in peers:
        peer.href = cluster_reverse(request, "offloading:cluster_detail", peer.cluster.cluster_id)
    _radius, node_radius, label_size = ring(len(clusters))
    edges, marks, items = draw_peers(peers, node_radius, label_size)
    context = {
        "state": SnapshotState.get(managed),
        "peers": peers,
        "peer_edges": edges,
        "peer_marks": marks,
        "peer_items": items,
        "size": SIZE,
        "center": CENTER,
        "healthy_peers": sum(1 for c in clusters if not unhealthy(c)),
        "unhealthy_peers": [c for c in clusters if unhealthy(c)],
        "phases": sorted(phases.items()),
        "not_offloaded": Namespace.objects.of(managed).filter(offloaded=False).count(),
        "troubled": troubled,
        # What each capped list leaves out: its count, and the phases it is made of (links to the rest).
        "troubled_total": len(troubled) if len(troubled) < ATTENTION_ROWS else troubled_all.count(),
        "troubled_phases": sorted(p for p in phases if p not in ("Ready", "NoClusterSelected")),
        "failed_changes": failed[:RECENT_ROWS],
        "failed_total": failed.count(),
        "recent_changes": ChangeRequest.objects.of(managed)[:RECENT_ROWS],
        "changes_total": ChangeRequest.objects.of(managed).count(),
        "warnings": warnings[:RECENT_ROWS],
        "warnings_total": warnings.count(),
        "warned_namespaces": warnings.values("namespace").distinct().count(),
        "pods_remote": sum(pods.values()),
        # For admins: whether the webhook is set and how its last delivery went.
        "notifications": alerts.overview_status() if roles.role_of(request.user) == roles.ADMIN else None,
    }
    return render(request, "offloading/overview.html", context)


@login_required
@require_GET
def cluster_detail(request: HttpRequest, cluster_id: str) -> HttpResponse:
    managed = current_managed(request)
    cluster = get_object_or_404(Cluster.objects.of(managed), cluster_id=cluster_id)
    nodes = list(VirtualNode.objects.of(managed).filter(cluster_id=cluster_id))
    room = rooms([cluster_id], managed=managed)[cluster_id]
    hosted = ClusterOffloading.objects.of(managed).filter(cluster_id=cluster_id).select_related("namespace")
    # What is wrong first: a peer can host hundreds of namespaces, most of them fine.
    # The rows show only the namespace's name: its JSON (labels, spec, status) is not decoded for each.
    troubled_first = (
        hosted.annotate(
            fine=Case(When(state=liqo.REASON_NAMESPACE_CREATED, then=1), default=0, output_field=IntegerField())
        )
        .only("selected", "state", "since", "message", "namespace__name")
        .order_by("fine", "namespace__name")
    )
    running = Pod.objects.of(managed).filter(cluster_id=cluster_id)
    pods_page = capped(running.order_by("namespace", "name"), request, "pods", POD_ROWS)
    context = {
        "cluster": cluster,
        "nodes": [(node, *split_labels(node.labels or {})) for node in nodes],
        "room": room,
        "hosted": troubled_first[:HOSTED_SHOWN],
        "hosted_total": hosted.count(),
        "hosted_selected": hosted.filter(selected=True).count(),
        "hosted_states": sorted(hosted.values_list("state").annotate(n=Count("id")).order_by()),
        "pods": pods_page.object_list,
        "pods_page": pods_page,
        "pending": running.filter(~Q(phase="Running")).count(),
        **tenant_side(cluster),
    }
    return render(request, "offloading/cluster_detail.html", context)


def tenant_side(cluster: Cluster) -> dict[str, object]:
    """The other direction, as far as this cluster sees it: when the peer consumes our resources, Liqo
    creates here the twins of the namespaces it offloads (labelled with its cluster id) and keeps a
    tenant namespace for the peering."""
    mine = Namespace.objects.of(cluster.managed_id)
    twins = mine.filter(**{f"labels__{liqo.REMOTE_CLUSTER_ID_LABEL}": cluster.cluster_id}).exclude(
        name__startswith=liqo.TENANT_NAMESPACE_PREFIX
    )
    # One scan of the labels when they fit (the JSON lookup reads every namespace's): counted only when not.
    shown = list(twins.only("name", "status_phase", "created_at").order_by("name")[: TENANT_TWINS_SHOWN + 1])
    count = len(shown) if len(shown) <= TENANT_TWINS_SHOWN else twins.count()
    return {
        "consumer": cluster.is_consumer,
        "tenant_namespace": mine.filter(name=f"{liqo.TENANT_NAMESPACE_PREFIX}{cluster.cluster_id}")
        .only("name", "status_phase")
        .first(),
        "tenant_twins": shown[:TENANT_TWINS_SHOWN],
        "tenant_twin_count": count,
    }
