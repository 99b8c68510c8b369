"""The Liqo domain map (issue 28): the managed cluster(s) and their peers as one server-drawn SVG graph,
consumer -> provider arrows labelled with the namespaces offloaded along them, and the same edges as a
table (for screen readers, and for reading a domain of hundreds of peers)."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from liqo_rules import constants as liqo
from offloading.insight import domain
from offloading.insight.domain import DomainEdge, DomainNode, PlacedEdge, PlacedNode
from offloading.models import Cluster
from offloading.models.fleet import current_managed
from offloading.switcher import base_of

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


def _cut(name: str, chars: int) -> str:
    return name if len(name) <= chars else name[: chars - 1] + "…"


def node_url(node: DomainNode, peers: set[str], base: str = "") -> str:
    """A peer's page; the local managed cluster's page is the overview; the folded peers are the table
    (``base``: the page's cluster prefix, offloading/switcher.py)."""
    if node.more:
        return f"#{TABLE_ID}"
    if node.managed:
        return base + reverse("offloading:home")
    return base + reverse("offloading:cluster_detail", args=[node.id]) if node.id in peers else ""


def edge_url(edge: DomainEdge, managed: set[str], base: str = "") -> str:
    """The namespaces offloaded along the edge, as the namespace list filters them: those selecting the
    provider (``?cluster=``) when the consumer is managed here; the twins a consumer peer made here
    (by their label, without the peering's tenant namespace) when the provider is."""
    if domain.MORE_ID in (edge.source, edge.target):
        return f"#{TABLE_ID}"
    base += reverse("offloading:namespace_list")
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


def _attrs(**attrs: object) -> str:
    """SVG attributes, escaped (a value None or "" is left out; ``_`` in a name is ``-``)."""
    return "".join(
        f' {name.rstrip("_").replace("_", "-")}="{escape(str(value))}"'
        for name, value in attrs.items()
        if value is not None and value != ""
    )


def edge_markup(placed: PlacedEdge, url: str, title: str) -> str:
    """One arrow: a link (out of the tab order: the table has the same links) around its line and its count."""
    edge = placed.edge
    paint = EDGE_PAINT[edge.health]
    line = _attrs(
        x1=placed.x1,
        y1=placed.y1,
        x2=placed.x2,
        y2=placed.y2,
        stroke=paint["stroke"],
        stroke_width=placed.width,
        stroke_opacity="0.8",
        stroke_dasharray=paint["dash"],
        marker_end=f"url(#domain-arrow-{edge.health})",
    )
    count = ""
    if edge.namespaces:
        count = (
            f'<text{_attrs(x=placed.label_x, y=placed.label_y)} text-anchor="middle" dominant-baseline="central"'
            f' font-size="11" font-weight="700" fill="{paint["stroke"]}" stroke="#ffffff" stroke-width="3"'
            f' paint-order="stroke" class="edge-count">{edge.namespaces}</text>'
        )
    link = _attrs(
        href=url,
        tabindex="-1",
        class_="domain-edge",
        data_source=edge.source,
        data_target=edge.target,
        data_namespaces=edge.namespaces,
        data_health=edge.health,
    )
    return f"<a{link}><title>{escape(title)}</title><line{line}/>{count}</a>"


def node_markup(placed: PlacedNode, url: str, peer_r: float) -> str:
    """One cluster: a managed cluster's box, a peer's circle or the "and N more" circle, with its name."""
    node = placed.node
    paint = NODE_PAINT[node.health]
    kind = "domain-managed" if node.managed else "domain-more" if node.more else "domain-peer"
    link = _attrs(href=url, class_=f"domain-node {kind}", data_cluster=node.id, data_health=node.health)
    x, y = placed.x, placed.y
    if node.managed:
        box = _attrs(
            x=round(x - domain.BOX_W / 2, 1),
            y=round(y - domain.BOX_H / 2, 1),
            width=domain.BOX_W,
            height=domain.BOX_H,
            rx=8,
            fill="#0f2741",
            stroke=paint["stroke"],
            stroke_width=4,
            stroke_dasharray="6 3" if paint["dash"] else "",
        )
        shape = (
            f"<rect{box}/>"
            f'<text x="{x}" y="{y}" dy="-4" text-anchor="middle" font-size="13" font-weight="700" fill="#ffffff">'
            f"{escape(_cut(node.name, 16))}</text>"
            f'<text x="{x}" y="{y}" dy="12" text-anchor="middle" font-size="10" fill="#cfd8e3">managed · {node.health}</text>'
        )
        return f"<a{link}><title>{escape(_node_title(node))}</title>{shape}</a>"
    rotate = f"rotate({placed.rotate} {placed.label_x} {placed.label_y})" if placed.rotate else ""
    label = _attrs(x=placed.label_x, y=placed.label_y, text_anchor=placed.anchor, transform=rotate, class_="node-label")
    if node.more:
        shape = (
            f'<circle cx="{x}" cy="{y}" r="{domain.MORE_R}" fill="#ffffff" stroke="{paint["stroke"]}" stroke-width="2"'
            f' stroke-dasharray="4 2"/>'
            f'<text x="{x}" y="{y}" text-anchor="middle" dominant-baseline="central" font-size="10" font-weight="700"'
            f' fill="#1f2d3d">+{node.more}</text>'
            f'<text{label} dominant-baseline="central" font-size="12" font-style="italic" fill="#1f2d3d">'
            f"{escape(node.name)} peers</text>"
        )
    else:
        bad = node.health in (domain.UNHEALTHY, domain.UNREACHABLE)
        circle = _attrs(
            cx=x,
            cy=y,
            r=peer_r,
            fill=paint["fill"],
            stroke=paint["stroke"],
            stroke_width=2,
            stroke_dasharray=paint["dash"],
        )
        weight = ' font-weight="700" fill="#b42318"' if bad else ' fill="#1f2d3d"'
        shape = (
            f'<circle{circle}/><text{label} dominant-baseline="central" font-size="12"{weight}>'
            f"{escape(_cut(node.name, domain.LABEL_CHARS))}</text>"
        )
    return f"<a{link}><title>{escape(_node_title(node))}</title>{shape}</a>"


def domain_context(
    nodes: list[DomainNode], edges: list[DomainEdge], peers: set[str], base: str = ""
) -> dict[str, object]:
    """What the page draws and lists for a domain's nodes and edges (``peers``: the clusters that have a
    page, the snapshot's peers; ``base``: the page's cluster prefix, for its links).

    The picture's elements and the table's rows are built here rather than by the template engine
    (as views.fleet.matrix_cells): measured at 200 peers and 2,000 offloaded namespaces, the template
    took about 0.5 s of the page's 0.6 s (test client, SQLite); built here, the whole page takes 80 ms."""
    picture = domain.layout(nodes, edges)
    managed = {n.id for n in nodes if n.managed}
    urls = {n.id: node_url(n, peers, base) for n in nodes}
    urls[domain.MORE_ID] = f"#{TABLE_ID}"
    names = {n.node.id: n.node.name for n in picture.nodes}
    svg = "\n".join(
        [
            '<g class="domain-edges">',
            *(edge_markup(e, edge_url(e.edge, managed, base), _edge_title(e.edge, names)) for e in picture.edges),
            '</g><g class="domain-nodes">',
            *(node_markup(p, urls[p.node.id], picture.peer_r) for p in picture.nodes),
            "</g>",
        ]
    )
    # The table: every edge (none folded), troubled ones first.
    known = {n.id: n for n in nodes}
    ordered = sorted(
        (e for e in edges if e.source in known and e.target in known),
        key=lambda e: (-domain.EDGE_HEALTHS.index(e.health), e.source, e.target),
    )
    rows = "\n".join(_row(e, known, urls, managed, base) for e in ordered)
    linked = {e.source for e in edges} | {e.target for e in edges}
    return {
        "picture": picture,
        "svg": mark_safe(svg),  # noqa: S308 - every value escaped by _attrs and escape
        "rows": mark_safe(rows),  # noqa: S308 - the same
        "edge_count": len(ordered),
        "table_id": TABLE_ID,
        "managed": [n for n in nodes if n.managed],
        "peer_count": sum(1 for n in nodes if not n.managed),
        "offloaded_total": sum(e.namespaces for e in edges),
        "alone": [(n, urls[n.id]) for n in nodes if n.id not in linked],
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


BADGES = {domain.READY: "ok", domain.IDLE: "muted", domain.DEGRADED: "warn", domain.UNREACHABLE: "bad"}


def _cluster_cell(node: DomainNode, url: str) -> str:
    name = escape(node.name)
    cell = f'<a href="{escape(url)}">{name}</a>' if url else name
    return cell + (' <span class="badge info">managed</span>' if node.managed else "")


def _row(edge: DomainEdge, known: dict[str, DomainNode], urls: dict[str, str], managed: set[str], base: str) -> str:
    """One edge of the table: consumer, provider, the namespaces (linked), its health, the provider's."""
    consumer, provider = known[edge.source], known[edge.target]
    words = EDGE_WORDS[edge.health] + (f" ({edge.not_ready} not Ready)" if edge.not_ready else "")
    return (
        f'<tr data-source="{escape(edge.source)}" data-target="{escape(edge.target)}">'
        f"<td>{_cluster_cell(consumer, urls[consumer.id])}</td>"
        f"<td>{_cluster_cell(provider, urls[provider.id])}</td>"
        f'<td><a href="{escape(edge_url(edge, managed, base))}">{edge.namespaces}</a></td>'
        f'<td><span class="badge {BADGES[edge.health]}">{escape(words)}</span></td>'
        f'<td class="opt">{NODE_WORDS[provider.health]}</td></tr>'
    )


@login_required
@require_GET
def domain_map(request: HttpRequest) -> HttpResponse:
    managed = current_managed(request)
    nodes, edges = domain.local_domain(managed)
    peers = set(Cluster.objects.of(managed).values_list("cluster_id", flat=True))
    return render(request, "offloading/domain_map.html", domain_context(nodes, edges, peers, base_of(request)))
