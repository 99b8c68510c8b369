"""The Liqo domain map (issue 28): the managed clusters and their peers as one graph, with directed
consumer -> provider edges that carry the number of namespaces offloaded along them and their health.

Two parts:

- ``layout`` is pure: it takes nodes (clusters) and edges and returns where to draw them (an SVG's
  coordinates). It knows nothing of the snapshot, so that several managed clusters slot in later: they
  go on an inner ring, the peers on the outer one, grouped by the managed cluster they share most with.
- ``local_domain`` builds the nodes and edges from one managed cluster's snapshot: that cluster, an
  edge to every provider peer with the namespaces it hosts, and an edge from every peer that consumes
  it, with the twin namespaces it offloaded there.
- ``merge`` joins several managed clusters' views into one graph (the whole domain): a node per Liqo
  cluster id, so a managed cluster that another one peers with is one node, marked managed; an edge
  per direction, counted by the provider's own snapshot when the provider is managed (the twins it
  holds), else by the consumer's (the namespaces it selected there).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Q
from django.db.models.fields.json import KeyTextTransform

from liqo_rules import constants as liqo
from liqo_rules.peers import CONSUMER_ROLES, MODULE_UNHEALTHY, PROVIDER_ROLES, ROLE_CONSUMER_AND_PROVIDER
from offloading.models import Cluster, ClusterOffloading, Namespace, SnapshotState
from offloading.models.fleet import ManagedRef

# A node's health, worst last (the "and N more" node takes the worst of the peers it stands for).
HEALTHY, UNKNOWN, UNHEALTHY, UNREACHABLE = "healthy", "unknown", "unhealthy", "unreachable"
NODE_HEALTHS = (HEALTHY, UNKNOWN, UNHEALTHY, UNREACHABLE)
# An edge's health: every namespace along it Ready, some not, an end unreachable, or nothing offloaded.
READY, DEGRADED, IDLE = "ready", "degraded", "idle"
EDGE_HEALTHS = (IDLE, READY, DEGRADED, UNREACHABLE)

MORE_ID = "+more"  # the node that stands for the peers left out of the picture
MAX_PEERS = 120  # peers drawn; past it, the least eventful are folded into one "and N more" node

# Geometry, in SVG user units (the picture is drawn at its natural size: a unit is a CSS pixel).
LABEL_SIZE = 12  # a peer's name; never smaller
LABEL_CHARS = 22  # a longer name is cut (its full name is in the node's tooltip and in the table)
CHAR_WIDTH = 0.62 * LABEL_SIZE  # a character of a label, at most (digits and lower case are narrower)
PEER_R, PEER_R_DENSE = 9, 7  # a peer's circle; smaller when neighbours are closer than DENSE_SPACING
MORE_R = 16  # the "and N more" circle
SPACING = 17  # between neighbouring peers along the ring: radial labels of LABEL_SIZE never touch
RING_MIN = 190  # the peers' ring, at least
BOX_W, BOX_H = 132, 46  # a managed cluster's box
INNER_SPACING = (
    230  # between managed clusters on the inner ring (several of them): room for two counts between neighbours
)
MARGIN = 14
PAIR_SHIFT = 4  # two edges between the same clusters, one each way: each this far to its right
DENSE_SPACING = 40  # below this gap along the ring, edge labels alternate between two distances
LABEL_STEP = 40  # between the counts of a peer's arrows from (or to) different managed clusters


@dataclass(frozen=True)
class DomainNode:
    id: str  # the Liqo cluster id
    name: str
    managed: bool  # a cluster this installation manages (today: the local one), else a peer
    health: str  # one of NODE_HEALTHS
    role: str = ""  # a peer's Liqo role as its managed cluster sees it (Provider, Consumer, ConsumerAndProvider)
    more: int = 0  # the "and N more" node: how many peers it stands for


@dataclass(frozen=True)
class DomainEdge:
    source: str  # the consumer's id
    target: str  # the provider's id
    namespaces: int  # offloaded from the consumer to the provider
    not_ready: int  # of those, how many are not Ready there
    health: str  # one of EDGE_HEALTHS
    peers: int = 1  # >1: the folded edges of the "and N more" node


@dataclass(frozen=True)
class PlacedNode:
    node: DomainNode
    x: float
    y: float
    label_x: float
    label_y: float
    anchor: str  # the label's text-anchor
    rotate: float  # degrees: a peer's label follows its radius, never upside down


@dataclass(frozen=True)
class PlacedEdge:
    edge: DomainEdge
    x1: float
    y1: float
    x2: float  # the arrow's tip, on the target's outline
    y2: float
    label_x: float
    label_y: float
    width: float


@dataclass(frozen=True)
class Layout:
    size: int  # the picture is drawn in a square of this side (user units: CSS pixels)
    nodes: list[PlacedNode]
    edges: list[PlacedEdge]
    hidden: int  # peers folded into the "and N more" node (0: none)
    label_room: float  # how far the longest peer label runs outwards from its node
    peer_r: float  # a peer's circle
    # The band of the square that holds something (what the page shows): with a few peers the ring
    # is mostly empty above and below (two peers sit left and right of the managed cluster).
    top: int
    height: int


def edge_health(namespaces: int, not_ready: int, reachable: bool) -> str:
    if not reachable:
        return UNREACHABLE
    if not namespaces:
        return IDLE
    return DEGRADED if not_ready else READY


def _worst(healths: list[str], order: tuple[str, ...]) -> str:
    return max(healths, key=order.index, default=order[0])


# --------------------------------------------------------------------------------------------------
# Folding: past ``limit`` peers, the least eventful ones become one node with their edges summed.


def _peer_rank(node: DomainNode, edges: list[DomainEdge]) -> tuple[int, int, int, int, str]:
    """Sorts first what the picture must show: troubled peers and edges, peers with edges both ways
    (consumers of a managed cluster too), then the busiest edges."""
    trouble = max((EDGE_HEALTHS.index(e.health) for e in edges), default=0)
    return (
        -NODE_HEALTHS.index(node.health),
        -trouble,
        -len(edges),
        -sum(e.namespaces for e in edges),
        node.id,
    )


def fold(
    nodes: list[DomainNode], edges: list[DomainEdge], limit: int = MAX_PEERS
) -> tuple[list[DomainNode], list[DomainEdge], int]:
    """At most ``limit`` peers (``limit - 1`` and an "and N more" node once there are more); the
    managed clusters always stay. Returns the nodes, the edges and how many peers were folded."""
    peers = [n for n in nodes if not n.managed]
    if len(peers) <= limit:
        return nodes, edges, 0
    touching: dict[str, list[DomainEdge]] = defaultdict(list)
    for edge in edges:
        touching[edge.source].append(edge)
        touching[edge.target].append(edge)
    ranked = sorted(peers, key=lambda n: _peer_rank(n, touching[n.id]))
    hidden = {n.id for n in ranked[limit - 1 :]}
    more = DomainNode(
        MORE_ID,
        f"and {len(hidden)} more",
        managed=False,
        health=_worst([n.health for n in ranked[limit - 1 :]], NODE_HEALTHS),
        more=len(hidden),
    )
    kept_edges: list[DomainEdge] = []
    folded: dict[tuple[str, str], list[DomainEdge]] = defaultdict(list)
    for edge in edges:
        if edge.source in hidden and edge.target in hidden:
            continue  # between two folded peers: nothing to draw (the table has it)
        if edge.source in hidden or edge.target in hidden:
            key = (MORE_ID if edge.source in hidden else edge.source, MORE_ID if edge.target in hidden else edge.target)
            folded[key].append(edge)
        else:
            kept_edges.append(edge)
    for (source, target), group in folded.items():
        kept_edges.append(
            DomainEdge(
                source,
                target,
                sum(e.namespaces for e in group),
                sum(e.not_ready for e in group),
                _worst([e.health for e in group], EDGE_HEALTHS),
                peers=len(group),
            )
        )
    kept_nodes = [n for n in nodes if n.id not in hidden] + [more]
    return kept_nodes, kept_edges, len(hidden)


# --------------------------------------------------------------------------------------------------
# The layout: managed clusters in the middle (one at the centre, several on an inner ring), the peers
# on a ring around them with their names along the radius, outwards.


def _ring_order(peers: list[DomainNode], managed: list[DomainNode], edges: list[DomainEdge]) -> list[DomainNode]:
    """Peers grouped by the managed cluster they share most namespaces with (in the managed clusters'
    order, so each group faces its cluster), by name within a group; the "and N more" node last."""
    index = {n.id: i for i, n in enumerate(managed)}
    weight: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for edge in edges:
        for peer, other in ((edge.source, edge.target), (edge.target, edge.source)):
            if other in index:
                weight[peer][index[other]] += edge.namespaces + 1

    def group(node: DomainNode) -> int:
        shares = weight.get(node.id)
        return min(shares, key=lambda i: (-shares[i], i)) if shares else len(managed)

    return sorted(peers, key=lambda n: (n.more > 0, group(n), n.name, n.id))


def _outline_point(
    node: DomainNode, x: float, y: float, ux: float, uy: float, shift: float, peer_r: float
) -> tuple[float, float]:
    """Where a line parallel to the unit direction (ux, uy), ``shift`` to its right of the centre of
    ``node`` (at x, y), leaves the node's outline going that way."""
    nx, ny = -uy * shift, ux * shift
    if node.managed:  # a box: the first of its sides the ray crosses
        sx, sy = nx, ny  # the start, from the box's centre
        t = min(
            ((BOX_W / 2) * math.copysign(1, ux) - sx) / ux if abs(ux) > 1e-9 else math.inf,
            ((BOX_H / 2) * math.copysign(1, uy) - sy) / uy if abs(uy) > 1e-9 else math.inf,
        )
        return x + sx + ux * t, y + sy + uy * t
    radius = MORE_R if node.more else peer_r
    along = math.sqrt(max(radius * radius - shift * shift, 0.0))
    return x + nx + ux * along, y + ny + uy * along


def _along(x1: float, y1: float, x2: float, y2: float, distance: float) -> tuple[float, float]:
    """The point ``distance`` from (x2, y2) back toward (x1, y1) (clamped to the segment's middle)."""
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    t = min(distance / length, 0.5)
    return x2 + (x1 - x2) * t, y2 + (y1 - y2) * t


def layout(nodes: list[DomainNode], edges: list[DomainEdge], limit: int = MAX_PEERS) -> Layout:
    """Where to draw ``nodes`` and ``edges`` (edges whose ends are not among the nodes are left out).
    Pure: no database, no Django; the same input gives the same picture."""
    known = {n.id for n in nodes}
    edges = [e for e in edges if e.source in known and e.target in known and e.source != e.target]
    nodes, edges, hidden = fold(nodes, edges, limit)
    managed = [n for n in nodes if n.managed]
    peers = _ring_order([n for n in nodes if not n.managed], managed, edges)

    inner = 0.0 if len(managed) <= 1 else max(150.0, len(managed) * INNER_SPACING / (2 * math.pi))
    # Each peer takes SPACING along the ring; the bigger "and N more" node takes its extra width too.
    more_slot = 2 * (MORE_R + PEER_R + 4) - SPACING  # its centre that far from its neighbours' (at 4 apart)
    slots = [more_slot if n.more else SPACING for n in peers]
    ring = max(RING_MIN, sum(slots) / (2 * math.pi), inner + BOX_W + 90)
    # Room for the longest label as drawn (cut at LABEL_CHARS; the "and N more" node's reads "... peers").
    longest = max((len(n.name) + (6 if n.more else 0) for n in peers), default=0)
    label_room = min(longest, LABEL_CHARS) * CHAR_WIDTH
    half = float(math.ceil(ring + MORE_R + 6 + label_room + MARGIN))
    centre = half
    stretch = 2 * math.pi * ring / max(sum(slots), 1)  # > 1 when the ring is bigger than the slots need
    spacing = SPACING * stretch
    peer_r = PEER_R if spacing >= DENSE_SPACING else PEER_R_DENSE

    placed: dict[str, PlacedNode] = {}
    for i, node in enumerate(managed):
        angle = 2 * math.pi * (i + 0.5) / len(managed) - math.pi / 2
        x, y = centre + inner * math.cos(angle), centre + inner * math.sin(angle)
        placed[node.id] = PlacedNode(node, round(x, 1), round(y, 1), round(x, 1), round(y, 1), "middle", 0.0)
    alternate: dict[str, bool] = {}
    # What is drawn, vertically: the managed boxes, then every peer, its label and the edges' counts.
    ys = [y for p in placed.values() for y in (p.y - BOX_H / 2, p.y + BOX_H / 2)]
    along = 0.0  # the arc length before this peer's slot
    for i, node in enumerate(peers):
        slot = slots[i] * stretch
        angle = (along + slot / 2) / ring - math.pi / 2
        along += slot
        cos, sin = math.cos(angle), math.sin(angle)
        out = ring + (MORE_R if node.more else peer_r) + 6
        anchor = "start" if cos >= -1e-9 else "end"  # read outwards on the right, inwards on the left
        rotate = (math.degrees(angle) + (0 if anchor == "start" else 180) + 180) % 360 - 180
        placed[node.id] = PlacedNode(
            node,
            round(centre + ring * cos, 1),
            round(centre + ring * sin, 1),
            round(centre + out * cos, 1),
            round(centre + out * sin, 1),
            anchor,
            round(rotate, 1),
        )
        alternate[node.id] = spacing < DENSE_SPACING and i % 2 == 1
        r = MORE_R if node.more else peer_r
        label_end = centre + (out + label_room) * sin  # a label runs outwards along the radius
        ys += [centre + ring * sin - r, centre + ring * sin + r, label_end - LABEL_SIZE, label_end + LABEL_SIZE]

    pairs = {(e.source, e.target) for e in edges}
    most = max((e.namespaces for e in edges), default=0) or 1
    drawn = []
    # A peer that several managed clusters share has several arrows into it (or out of it): their
    # counts step further from it, one LABEL_STEP each, so they do not sit on one another at its end.
    nth: dict[tuple[str, bool], int] = defaultdict(int)
    for edge in edges:
        a, b = placed[edge.source], placed[edge.target]
        length = math.hypot(b.x - a.x, b.y - a.y) or 1.0
        ux, uy = (b.x - a.x) / length, (b.y - a.y) / length
        shift = PAIR_SHIFT if (edge.target, edge.source) in pairs else 0.0  # both ways: each on its right
        x1, y1 = _outline_point(a.node, a.x, a.y, ux, uy, shift, peer_r)
        x2, y2 = _outline_point(b.node, b.x, b.y, -ux, -uy, -shift, peer_r)
        # The count sits near the peer end, away from the crowd in the middle: before the arrowhead on
        # an edge to a peer, further in on an edge from one (so both directions of a pair can be read);
        # between two managed clusters, before the arrowhead (each way's count near its provider).
        if not b.node.managed:
            step = nth[(b.node.id, True)] * LABEL_STEP
            nth[(b.node.id, True)] += 1
            lx, ly = _along(x1, y1, x2, y2, 28 + step + (20 if alternate.get(b.node.id) else 0))
        elif not a.node.managed:
            step = nth[(a.node.id, False)] * LABEL_STEP
            nth[(a.node.id, False)] += 1
            lx, ly = _along(x2, y2, x1, y1, 70 + step + (20 if alternate.get(a.node.id) else 0))
        else:  # between two managed clusters: before the arrowhead too, so that the two ways' counts part
            lx, ly = _along(x1, y1, x2, y2, 30)
        width = 1.5 + 4.5 * edge.namespaces / most if edge.namespaces else 1.2
        drawn.append(
            PlacedEdge(
                edge,
                round(x1, 1),
                round(y1, 1),
                round(x2, 1),
                round(y2, 1),
                round(lx, 1),
                round(ly, 1),
                round(width, 1),
            )
        )
    ordered = [placed[n.id] for n in managed] + [placed[n.id] for n in peers]
    ys += [y for e in drawn for y in (e.label_y - LABEL_SIZE, e.label_y + LABEL_SIZE)]
    size = int(2 * half)
    top = max(0, math.floor(min(ys) - MARGIN)) if ys else 0
    bottom = min(size, math.ceil(max(ys) + MARGIN)) if ys else size
    return Layout(size, ordered, drawn, hidden, round(label_room, 1), peer_r, top, bottom - top)


# --------------------------------------------------------------------------------------------------
# Today's domain, from the snapshot: the local cluster and its peers.


def peer_health(networking: str, authentication: str, offloading: str) -> str:
    """A peer as its ForeignCluster's modules say: its network down makes it unreachable."""
    if networking == MODULE_UNHEALTHY:
        return UNREACHABLE
    if MODULE_UNHEALTHY in (authentication, offloading):
        return UNHEALTHY
    if not (networking or authentication or offloading):
        return UNKNOWN
    return HEALTHY


def local_health(state: SnapshotState) -> str:
    """The local cluster as the snapshot knows it: its API server failing the last refresh makes it
    unreachable; never refreshed, or stale without an error, unknown."""
    if state.last_success_at is None:
        return UNKNOWN
    if state.last_error and state.last_attempt_at and state.last_attempt_at > state.last_success_at:
        return UNREACHABLE
    return UNKNOWN if state.is_stale() else HEALTHY


LOCAL_FALLBACK_ID = "local"  # when the snapshot has not learned the local cluster's id yet


def local_domain(
    managed: ManagedRef = None, *, name: str = "", fallback_id: str = LOCAL_FALLBACK_ID
) -> tuple[list[DomainNode], list[DomainEdge]]:
    """The managed (local) cluster and its peers: an edge to each provider with the namespaces selected
    there (Ready: NamespaceCreated), an edge from each consumer with its twin namespaces here (not
    Ready: Terminating). Three grouped reads, whatever the number of peers. ``managed``: which managed
    cluster is the local one (None: the default cluster); ``name``: what to call it (its id when
    empty); ``fallback_id``: its id until the snapshot learns its Liqo cluster id. The local cluster is
    the first node."""
    state = SnapshotState.get(managed)
    local_id = state.local_cluster_id or fallback_id
    local = DomainNode(local_id, name or local_id, managed=True, health=local_health(state))
    nodes: dict[str, DomainNode] = {}
    roles: dict[str, str] = {}
    for cluster_id, name, role, networking, authentication, offloading in (
        Cluster.objects.of(managed)
        .order_by("cluster_id")
        .values_list("cluster_id", "name", "role", "networking_status", "authentication_status", "offloading_status")
    ):
        nodes[cluster_id] = DomainNode(
            cluster_id, name or cluster_id, False, peer_health(networking, authentication, offloading), role
        )
        roles[cluster_id] = role
    hosted = {
        cluster_id: (n, n - ready)
        for cluster_id, n, ready in ClusterOffloading.objects.of(managed)
        .filter(selected=True)
        .order_by()
        .values("cluster_id")
        .annotate(n=Count("id"), ready=Count("id", filter=Q(state=liqo.REASON_NAMESPACE_CREATED)))
        .values_list("cluster_id", "n", "ready")
    }
    twins = {
        peer: (n, terminating)
        for peer, n, terminating in Namespace.objects.of(managed)
        .filter(labels__has_key=liqo.REMOTE_CLUSTER_ID_LABEL)
        .exclude(name__startswith=liqo.TENANT_NAMESPACE_PREFIX)
        .annotate(peer=KeyTextTransform(liqo.REMOTE_CLUSTER_ID_LABEL, "labels"))
        .order_by()
        .values("peer")
        .annotate(n=Count("id"), terminating=Count("id", filter=Q(status_phase="Terminating")))
        .values_list("peer", "n", "terminating")
        if peer
    }
    for cluster_id in sorted((hosted.keys() | twins.keys()) - nodes.keys() - {local_id}):
        nodes[cluster_id] = DomainNode(cluster_id, cluster_id, False, UNKNOWN)  # rows left of a peer now gone
    reachable = local.health != UNREACHABLE
    edges = []
    for cluster_id, peer in nodes.items():
        up = reachable and peer.health != UNREACHABLE
        if roles.get(cluster_id) in PROVIDER_ROLES or cluster_id in hosted:
            n, not_ready = hosted.get(cluster_id, (0, 0))
            edges.append(DomainEdge(local_id, cluster_id, n, not_ready, edge_health(n, not_ready, up)))
        if roles.get(cluster_id) in CONSUMER_ROLES or cluster_id in twins:
            n, not_ready = twins.get(cluster_id, (0, 0))
            edges.append(DomainEdge(cluster_id, local_id, n, not_ready, edge_health(n, not_ready, up)))
    return [local, *nodes.values()], edges


# --------------------------------------------------------------------------------------------------
# The whole domain: every managed cluster's view, merged.


@dataclass(frozen=True)
class Domain:
    """The merged graph, and where each part was read (an index into the views given to ``merge``):
    ``seen_by`` the view a node was first seen in (a peer's page is in that cluster's pages; a managed
    cluster's is its own), ``counted_by`` the view whose rows an edge's count is (its namespaces are
    listed in that cluster's pages)."""

    nodes: list[DomainNode]
    edges: list[DomainEdge]
    seen_by: dict[str, int]
    counted_by: dict[tuple[str, str], int]


def _role(a: str, b: str) -> str:
    """A peer's role seen by two managed clusters: provider to one and consumer of another is both."""
    if not a or a == b:
        return b
    if not b:
        return a
    provides = a in PROVIDER_ROLES or b in PROVIDER_ROLES
    consumes = a in CONSUMER_ROLES or b in CONSUMER_ROLES
    return ROLE_CONSUMER_AND_PROVIDER if provides and consumes else a


def merge(views: list[tuple[list[DomainNode], list[DomainEdge]]]) -> Domain:
    """One graph of several managed clusters' views (each as ``local_domain`` returns it: its managed
    cluster first). Pure.

    - A node per cluster id: a peer whose id is a managed cluster's is that managed cluster's node; a
      peer several clusters see is one node, with the worst health any of them sees, its first name
      that is not its bare id, and its roles joined.
    - An edge per (consumer, provider): between two managed clusters both snapshots have it, the
      consumer's selected offloadings and the provider's twin namespaces; the count is the provider's
      (what exists there), and its health the worse of both readings (a namespace the consumer still
      waits for, or an end one of them cannot reach, shows), its not-Ready count the larger."""
    managed_ids: dict[str, int] = {}
    for index, (nodes, _edges) in enumerate(views):
        if nodes:
            managed_ids.setdefault(nodes[0].id, index)
    found: dict[str, DomainNode] = {}
    seen_by: dict[str, int] = {}
    for index, (nodes, _edges) in enumerate(views):
        for position, node in enumerate(nodes):
            if position == 0 or node.id not in managed_ids:
                kept = found.get(node.id)
                if kept is None:
                    found[node.id] = node
                    seen_by[node.id] = index
                elif not kept.managed:  # a peer seen again (a second managed view of one id is ignored)
                    found[node.id] = DomainNode(
                        node.id,
                        kept.name if kept.name != kept.id else node.name,
                        False,
                        _worst([kept.health, node.health], NODE_HEALTHS),
                        _role(kept.role, node.role),
                    )
    readings: dict[tuple[str, str], dict[str, tuple[int, DomainEdge]]] = defaultdict(dict)
    for index, (nodes, edges) in enumerate(views):
        own = nodes[0].id if nodes else ""
        for edge in edges:
            side = "provider" if edge.target == own else "consumer"
            readings[(edge.source, edge.target)].setdefault(side, (index, edge))
    merged: list[DomainEdge] = []
    counted_by: dict[tuple[str, str], int] = {}
    for key, sides in readings.items():
        index, chosen = sides.get("provider") or sides["consumer"]
        others = [edge for _i, edge in sides.values()]
        merged.append(
            DomainEdge(
                chosen.source,
                chosen.target,
                chosen.namespaces,
                max(e.not_ready for e in others),
                _worst([e.health for e in others], EDGE_HEALTHS),
            )
        )
        counted_by[key] = index
    managed_nodes = [n for n in found.values() if n.managed]
    peers = [n for n in found.values() if not n.managed]
    return Domain([*managed_nodes, *peers], merged, seen_by, counted_by)


def neighbourhood(whole: Domain, cluster_id: str, peers: set[str] | frozenset[str] = frozenset()) -> Domain:
    """The part of the domain around one cluster: it, its ``peers`` (those its own snapshot lists, with
    an edge or not), the clusters it shares an edge with, and those edges (counted as in the whole
    domain, so both pictures agree)."""
    edges = [e for e in whole.edges if cluster_id in (e.source, e.target)]
    near = {cluster_id} | set(peers) | {e.source for e in edges} | {e.target for e in edges}
    return Domain(
        [n for n in whole.nodes if n.id in near],
        edges,
        {k: v for k, v in whole.seen_by.items() if k in near},
        {k: v for k, v in whole.counted_by.items() if k[0] in near and k[1] in near and cluster_id in k},
    )
