"""The Liqo domain map (issue 28): every managed cluster and their peers as one server-drawn SVG graph
(``domain.merge``: a managed cluster another one peers with is one node), consumer -> provider arrows
labelled with the namespaces offloaded along them, and the same edges as a table (for screen readers,
and for reading a domain of hundreds of peers).

Reads are not scoped: as on the namespace lists, every signed-in user with a role sees every cluster's
rows (an operator's scopes say what they may change, access/policy.py; the access middleware refuses a
user without a role)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
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
from offloading.models import Cluster, ManagedCluster
from offloading.models.fleet import current_managed
from offloading.models.managed import ensure_configured
from offloading.switcher import cluster_base

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


@dataclass(frozen=True)
class View:
    """One managed cluster's view of the domain, as the page links into it: its pages' prefix and the
    peers its snapshot has rows of (those have a page there)."""

    managed_id: str  # its Liqo cluster id (its node)
    base: str  # offloading/switcher.py: "" for the default cluster, /m/<name> for another
    peers: frozenset[str]


def node_url(node: DomainNode, view: View | None) -> str:
    """A managed cluster's overview; a peer's page in the cluster that sees it (``view``, None: no
    managed cluster has a row of it, no page); the folded peers are the table."""
    if node.more:
        return f"#{TABLE_ID}"
    if view is None:
        return ""
    if node.managed:
        return view.base + reverse("offloading:home")
    return view.base + reverse("offloading:cluster_detail", args=[node.id]) if node.id in view.peers else ""


def edge_url(edge: DomainEdge, view: View | None) -> str:
    """The namespaces offloaded along the edge, as the namespace list of the cluster that counted them
    (``view``) filters them: the twins the consumer made there (by their label, without the peering's
    tenant namespace) when it is the provider; those selecting the provider (``?cluster=``) when it is
    the consumer."""
    if domain.MORE_ID in (edge.source, edge.target):
        return f"#{TABLE_ID}"
    if view is None:
        return ""
    base = view.base + reverse("offloading:namespace_list")
    if edge.target == view.managed_id:
        selector = f"{liqo.REMOTE_CLUSTER_ID_LABEL}={edge.source},!{liqo.TENANT_NAMESPACE_LABEL}"
        return f"{base}?{urlencode({'selector': selector})}"
    return f"{base}?{urlencode({'cluster': edge.target})}"


def _node_title(node: DomainNode) -> str:
    if node.more:
        return f"{node.more} more peers, listed in the table below (the worst of them: {NODE_WORDS[node.health]})"
    what = "managed cluster" if node.managed else f"peer ({node.role or 'role unknown'})"
    known_as = f" (Liqo cluster id {node.id})" if node.name != node.id else ""
    return f"{node.name}{known_as}: {what}, {NODE_WORDS[node.health]}"


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


def domain_context(whole: domain.Domain, views: list[View]) -> dict[str, object]:
    """What the page draws and lists for a domain (``views``: the managed clusters' views, in the order
    given to ``domain.merge``, for its links).

    The picture's elements and the table's rows are built here rather than by the template engine
    (as views.fleet.matrix_cells): measured at 200 peers and 2,000 offloaded namespaces, the template
    took about 0.5 s of the page's 0.6 s (test client, SQLite); built here, the whole page takes 80 ms."""
    nodes, edges = whole.nodes, whole.edges
    picture = domain.layout(nodes, edges)
    view_of = {v.managed_id: v for v in views}
    urls = {}
    for n in nodes:
        if n.managed:
            urls[n.id] = node_url(n, view_of.get(n.id))
        else:  # the first cluster that has a row of the peer, if any
            urls[n.id] = next((node_url(n, v) for v in views if n.id in v.peers), "")
    urls[domain.MORE_ID] = f"#{TABLE_ID}"
    edge_urls = {
        (e.source, e.target): edge_url(e, views[whole.counted_by[(e.source, e.target)]])
        if (e.source, e.target) in whole.counted_by
        else ""
        for e in edges
    }
    names = {n.node.id: n.node.name for n in picture.nodes}
    svg = "\n".join(
        [
            '<g class="domain-edges">',
            *(
                edge_markup(
                    e, edge_urls.get((e.edge.source, e.edge.target)) or f"#{TABLE_ID}", _edge_title(e.edge, names)
                )
                for e in picture.edges
            ),
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
    rows = "\n".join(_row(e, known, urls, edge_urls[(e.source, e.target)]) for e in ordered)
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


def _row(edge: DomainEdge, known: dict[str, DomainNode], urls: dict[str, str], url: str) -> str:
    """One edge of the table: consumer, provider, the namespaces (linked), its health, the provider's."""
    consumer, provider = known[edge.source], known[edge.target]
    words = EDGE_WORDS[edge.health] + (f" ({edge.not_ready} not Ready)" if edge.not_ready else "")
    count = f'<a href="{escape(url)}">{edge.namespaces}</a>' if url else str(edge.namespaces)
    return (
        f'<tr data-source="{escape(edge.source)}" data-target="{escape(edge.target)}">'
        f"<td>{_cluster_cell(consumer, urls[consumer.id])}</td>"
        f"<td>{_cluster_cell(provider, urls[provider.id])}</td>"
        f"<td>{count}</td>"
        f'<td><span class="badge {BADGES[edge.health]}">{escape(words)}</span></td>'
        f'<td class="opt">{NODE_WORDS[provider.health]}</td></tr>'
    )


def _views() -> tuple[list[ManagedCluster], list[tuple[list[DomainNode], list[DomainEdge]]], list[View]]:
    """Every managed cluster's view of the domain (the default cluster first): its snapshot's graph
    (``domain.local_domain``) and how the page links into it. Four reads per managed cluster, one more
    for the peers every cluster has rows of."""
    ensure_configured()  # the rows of LIQO_DASH_CLUSTERS, before their first refresh
    clusters = list(ManagedCluster.objects.order_by("-is_default", "name"))
    rows: dict[int, set[str]] = defaultdict(set)
    for managed_id, cluster_id in Cluster.objects.order_by().values_list("managed_id", "cluster_id"):
        rows[managed_id].add(cluster_id)
    graphs, views = [], []
    for cluster in clusters:
        fallback = domain.LOCAL_FALLBACK_ID if cluster.is_default else f"{domain.LOCAL_FALLBACK_ID}-{cluster.name}"
        nodes, edges = domain.local_domain(cluster, name=cluster.name, fallback_id=cluster.liqo_cluster_id or fallback)
        graphs.append((nodes, edges))
        views.append(View(nodes[0].id, cluster_base(cluster.name, cluster.is_default), frozenset(rows[cluster.pk])))
    return clusters, graphs, views


@login_required
@require_GET
def domain_map(request: HttpRequest) -> HttpResponse:
    """The whole domain on the default cluster's path (``/domain/``); under a cluster's prefix
    (``/m/<name>/domain/``), that cluster's neighbourhood in the same graph (the same counts), with a
    link to the whole."""
    clusters, graphs, views = _views()
    whole = domain.merge(graphs)
    context: dict[str, object] = {"whole_url": "", "around": None, "clusters": clusters}
    if getattr(request, "cluster_name", None):
        pk = current_managed(request)
        index = next(i for i, c in enumerate(clusters) if c.pk == pk)
        around = graphs[index][0][0]
        whole = domain.neighbourhood(whole, around.id, views[index].peers)
        context |= {"whole_url": reverse("offloading:domain_map"), "around": around}
    return render(request, "offloading/domain_map.html", context | domain_context(whole, views))
