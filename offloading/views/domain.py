"""The Liqo domain map (issue 28): the managed cluster(s) and their peers as one server-drawn SVG graph,
consumer -> provider arrows labelled with the namespaces offloaded along them, and the same edges as a
table (for screen readers, and for reading a domain of hundreds of peers)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from liqo_rules import constants as liqo
from offloading.insight import domain
from offloading.insight.domain import DomainEdge, DomainNode, PlacedEdge, PlacedNode
from offloading.models import Cluster

# How each health is drawn (SVG presentation attributes: the CSP forbids inline style). Colour is never
# the only mark: an unreachable node or edge is also dotted, a degraded edge dashed, and the table says it.
NODE_PAINT = {
    domain.HEALTHY: {"fill": "#d1fadf", "stroke": "#1f7a3a", "dash": ""},
    domain.UNKNOWN: {"fill": "#f2f4f7", "stroke": "#667085", "dash": ""},
    domain.UNHEALTHY: {"fill": "#fee4e2", "stroke": "#b42318", "dash": ""},
    domain.UNREACHABLE: {"fill": "#ffffff", "stroke": "#b42318", "dash": "3 2"},
}
EDGE_PAINT = {
    domain.READY: {"stroke": "#1f7a3a", "dash": ""},
    domain.DEGRADED: {"stroke": "#b54708", "dash": "7 4"},
    domain.UNREACHABLE: {"stroke": "#b42318", "dash": "2 4"},
    domain.IDLE: {"stroke": "#98a2b3", "dash": ""},
}
NODE_WORDS = {
    domain.HEALTHY: "healthy",
    domain.UNKNOWN: "health unknown",
    domain.UNHEALTHY: "unhealthy",
    domain.UNREACHABLE: "unreachable",
}
EDGE_WORDS = {
    domain.READY: "all Ready",
    domain.DEGRADED: "some not Ready",
    domain.UNREACHABLE: "unreachable",
    domain.IDLE: "nothing offloaded",
}
TABLE_ID = "domain-edges"


@dataclass(frozen=True)
class DrawnNode:
    placed: PlacedNode
    url: str
    label: str  # the name as drawn (cut at LABEL_CHARS)
    title: str  # the tooltip: the whole name and what the node is
    words: str  # its health in words
    fill: str
    stroke: str
    dash: str

    @property
    def box_x(self) -> float:  # a managed cluster's box, around its centre
        return round(self.placed.x - domain.BOX_W / 2, 1)

    @property
    def box_y(self) -> float:
        return round(self.placed.y - domain.BOX_H / 2, 1)


@dataclass(frozen=True)
class DrawnEdge:
    placed: PlacedEdge
    url: str
    title: str
    stroke: str
    dash: str
    marker: str


@dataclass(frozen=True)
class Listed:
    """A cluster named in the table: linked to its page when it has one."""

    node: DomainNode
    url: str
    words: str


@dataclass(frozen=True)
class EdgeRow:
    edge: DomainEdge
    consumer: Listed
    provider: Listed
    url: str
    words: str


def _cut(name: str, chars: int) -> str:
    return name if len(name) <= chars else name[: chars - 1] + "…"


def node_url(node: DomainNode, peers: set[str]) -> str:
    """A peer's page; the local managed cluster's page is the overview; the folded peers are the table."""
    if node.more:
        return f"#{TABLE_ID}"
    if node.managed:
        return reverse("offloading:home")
    return reverse("offloading:cluster_detail", args=[node.id]) if node.id in peers else ""


def edge_url(edge: DomainEdge, managed: set[str]) -> str:
    """The namespaces offloaded along the edge, as the namespace list filters them: those selecting the
    provider (``?cluster=``) when the consumer is managed here; the twins a consumer peer made here
    (by their label, without the peering's tenant namespace) when the provider is."""
    if domain.MORE_ID in (edge.source, edge.target):
        return f"#{TABLE_ID}"
    base = reverse("offloading:namespace_list")
    if edge.source in managed:
        return f"{base}?{urlencode({'cluster': edge.target})}"
    selector = f"{liqo.REMOTE_CLUSTER_ID_LABEL}={edge.source},!{liqo.TENANT_NAMESPACE_LABEL}"
    return f"{base}?{urlencode({'selector': selector})}"


def _node_title(node: DomainNode) -> str:
    if node.more:
        return f"{node.more} more peers, listed in the table below (the worst of them: {NODE_WORDS[node.health]})"
    what = "managed cluster" if node.managed else f"peer ({node.role or 'role unknown'})"
    return f"{node.name}: {what}, {NODE_WORDS[node.health]}"


def _edge_title(edge: DomainEdge, names: dict[str, str]) -> str:
    count = f"{edge.namespaces} namespace{'' if edge.namespaces == 1 else 's'} offloaded"
    state = EDGE_WORDS[edge.health] + (f" ({edge.not_ready} not Ready)" if edge.not_ready else "")
    over = f" over {edge.peers} peers" if edge.peers > 1 else ""
    return f"{names[edge.source]} → {names[edge.target]}{over}: {count}, {state}"


def domain_context(nodes: list[DomainNode], edges: list[DomainEdge], peers: set[str]) -> dict[str, object]:
    """What the page draws and lists for a domain's nodes and edges (``peers``: the clusters that have a
    page, the snapshot's peers)."""
    picture = domain.layout(nodes, edges)
    managed = {n.id for n in nodes if n.managed}
    names = {n.node.id: n.node.name for n in picture.nodes}
    drawn_nodes = [
        DrawnNode(
            p,
            node_url(p.node, peers),
            _cut(p.node.name, 16 if p.node.managed else domain.LABEL_CHARS),
            _node_title(p.node),
            NODE_WORDS[p.node.health],
            NODE_PAINT[p.node.health]["fill"],
            NODE_PAINT[p.node.health]["stroke"],
            NODE_PAINT[p.node.health]["dash"],
        )
        for p in picture.nodes
    ]
    drawn_edges = [
        DrawnEdge(
            e,
            edge_url(e.edge, managed),
            _edge_title(e.edge, names),
            EDGE_PAINT[e.edge.health]["stroke"],
            EDGE_PAINT[e.edge.health]["dash"],
            f"domain-arrow-{e.edge.health}",
        )
        for e in picture.edges
    ]
    by_id = {n.id: Listed(n, node_url(n, peers), NODE_WORDS[n.health]) for n in nodes}
    # The table: every edge (none folded), troubled ones first.
    ordered = sorted(
        (e for e in edges if e.source in by_id and e.target in by_id),
        key=lambda e: (-domain.EDGE_HEALTHS.index(e.health), e.source, e.target),
    )
    rows = [
        EdgeRow(
            e,
            by_id[e.source],
            by_id[e.target],
            edge_url(e, managed),
            EDGE_WORDS[e.health] + (f" ({e.not_ready} not Ready)" if e.not_ready else ""),
        )
        for e in ordered
    ]
    linked = {e.source for e in edges} | {e.target for e in edges}
    return {
        "picture": picture,
        "nodes": drawn_nodes,
        "edges": drawn_edges,
        "rows": rows,
        "table_id": TABLE_ID,
        "managed": [n for n in nodes if n.managed],
        "peer_count": sum(1 for n in nodes if not n.managed),
        "offloaded_total": sum(e.namespaces for e in edges),
        "alone": [by_id[n.id] for n in nodes if n.id not in linked],
        "markers": [(f"domain-arrow-{health}", paint["stroke"]) for health, paint in EDGE_PAINT.items()],
        # The legend, with how many peers and edges are in each state (the picture's summary).
        "node_legend": [
            (NODE_WORDS[h], NODE_PAINT[h], sum(1 for n in nodes if not n.managed and n.health == h))
            for h in domain.NODE_HEALTHS
        ],
        "edge_legend": [
            (EDGE_WORDS[h], EDGE_PAINT[h], sum(1 for e in edges if e.health == h))
            for h in (domain.READY, domain.DEGRADED, domain.UNREACHABLE, domain.IDLE)
        ],
    }


@login_required
@require_GET
def domain_map(request: HttpRequest) -> HttpResponse:
    nodes, edges = domain.local_domain()
    peers = set(Cluster.objects.values_list("cluster_id", flat=True))
    return render(request, "offloading/domain_map.html", domain_context(nodes, edges, peers))
