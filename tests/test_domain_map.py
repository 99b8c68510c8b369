"""The Liqo domain map (issue 28): the pure layout of a domain's graph (positions, edges, folding past
the limit), the graph built from the snapshot, several managed clusters' views merged into one graph,
and the page that draws it as SVG with a table (the whole domain, and one cluster's neighbourhood)."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from access.models import Scope
from offloading.insight import domain
from offloading.insight.domain import DomainEdge, DomainNode, layout, local_domain
from offloading.models import Cluster, ClusterOffloading, ManagedCluster, Namespace, SnapshotState
from offloading.views import live

LOCAL = DomainNode("rome", "rome", managed=True, health=domain.HEALTHY)


def star(peers: int, *, consumers: int = 0) -> tuple[list[DomainNode], list[DomainEdge]]:
    """The local cluster offloading i namespaces to peer i (some not Ready on every 7th), and the first
    ``consumers`` peers offloading back to it."""
    nodes = [LOCAL]
    edges = []
    for i in range(peers):
        health = domain.UNREACHABLE if i % 11 == 5 else domain.HEALTHY
        peer = DomainNode(f"peer-{i:03d}", f"peer-{i:03d}", managed=False, health=health, role="Provider")
        nodes.append(peer)
        not_ready = 1 if i % 7 == 3 else 0
        edges.append(
            DomainEdge("rome", peer.id, i, not_ready, domain.edge_health(i, not_ready, health != domain.UNREACHABLE))
        )
        if i < consumers:
            edges.append(DomainEdge(peer.id, "rome", 2, 0, domain.READY))
    return nodes, edges


def _distance(a: Any, b: Any) -> float:
    return math.hypot(a.x - b.x, a.y - b.y)


@pytest.mark.parametrize("peers", [1, 3, 20, 50, 119, 120])
def test_the_layout_places_every_node_apart_inside_the_picture_and_keeps_every_edge(peers: int) -> None:
    nodes, edges = star(peers, consumers=3)
    picture = layout(nodes, edges)
    assert picture.hidden == 0 and picture.label_room == pytest.approx(len("peer-000") * domain.CHAR_WIDTH, abs=0.1)
    assert [p.node.id for p in picture.nodes][0] == "rome"
    assert sorted(p.node.id for p in picture.nodes) == sorted(n.id for n in nodes)
    placed = {p.node.id: p for p in picture.nodes}
    centre = picture.size / 2
    assert (placed["rome"].x, placed["rome"].y) == (centre, centre), "one managed cluster: in the middle"
    peer_nodes = [p for p in picture.nodes if not p.node.managed]
    if len(peer_nodes) > 1:
        closest = min(_distance(a, b) for i, a in enumerate(peer_nodes) for b in peer_nodes[i + 1 :])
        assert closest >= domain.SPACING - 0.5, "neighbours along the ring leave room for a label each"
        assert closest >= 2 * picture.peer_r + 2, "their circles do not touch"
    for p in peer_nodes:
        assert _distance(p, placed["rome"]) > domain.BOX_W / 2 + 40
        # The label starts outside the node, runs outwards, fits in the picture and is never upside down.
        assert math.hypot(p.label_x - centre, p.label_y - centre) > math.hypot(p.x - centre, p.y - centre)
        assert math.hypot(p.label_x - centre, p.label_y - centre) + picture.label_room <= centre + 0.5
        assert -90 <= p.rotate <= 90
    # Every edge is drawn once, between ends that exist, with its count; arrows end at the target's outline.
    assert sorted((e.edge.source, e.edge.target, e.edge.namespaces) for e in picture.edges) == sorted(
        (e.source, e.target, e.namespaces) for e in edges
    )
    for e in picture.edges:
        target = placed[e.edge.target]
        assert e.edge.source in placed and e.edge.target in placed
        if not target.node.managed:
            assert abs(math.hypot(e.x2 - target.x, e.y2 - target.y) - picture.peer_r) < 0.6
        assert 0 < e.label_x < picture.size and 0 < e.label_y < picture.size
    # A peer that is consumer and provider has two arrows, side by side rather than on top of each other.
    both = [e for e in picture.edges if "peer-000" in (e.edge.source, e.edge.target)]
    assert len(both) == 2 and math.hypot(both[0].x1 - both[1].x2, both[0].y1 - both[1].y2) > 5


def test_past_the_limit_the_quiet_peers_fold_into_one_node_with_their_counts_summed() -> None:
    nodes, edges = star(200, consumers=10)
    picture = layout(nodes, edges)
    shown = [p.node for p in picture.nodes if not p.node.managed]
    assert len(shown) == domain.MAX_PEERS and picture.hidden == 200 - (domain.MAX_PEERS - 1)
    more = next(n for n in shown if n.more)
    assert more.id == domain.MORE_ID and more.more == picture.hidden
    ids = {n.id for n in shown}
    # The unreachable peers and those with namespaces not Ready are never folded.
    assert all(n.id in ids for n in nodes if n.health == domain.UNREACHABLE)
    assert all(e.target in ids for e in edges if e.health == domain.DEGRADED)
    assert all(f"peer-{i:03d}" in ids for i in range(10)), "nor the peers that also consume the managed cluster"
    # Nothing offloaded is lost: the folded edges' counts add up on the "and N more" edge.
    assert sum(e.edge.namespaces for e in picture.edges) == sum(e.namespaces for e in edges)
    folded = next(e for e in picture.edges if e.edge.target == domain.MORE_ID)
    assert folded.edge.peers == picture.hidden and folded.edge.source == "rome"
    assert {e.edge.source for e in picture.edges} | {e.edge.target for e in picture.edges} <= ids | {"rome"}
    positions = {(p.x, p.y) for p in picture.nodes}
    assert len(positions) == len(picture.nodes), "positions distinct"
    # The bigger "and N more" circle keeps clear of its neighbours on the ring.
    placed_more = next(p for p in picture.nodes if p.node.more)
    others = [p for p in picture.nodes if p is not placed_more and not p.node.managed]
    assert min(_distance(placed_more, p) for p in others) >= domain.MORE_R + picture.peer_r + 4


def test_several_managed_clusters_sit_on_an_inner_ring_and_peers_face_theirs() -> None:
    milan = DomainNode("milan", "milan", managed=True, health=domain.HEALTHY)
    nodes = [LOCAL, milan] + [DomainNode(f"p{i}", f"p{i}", False, domain.HEALTHY, "Provider") for i in range(12)]
    edges = [DomainEdge("rome" if i < 6 else "milan", f"p{i}", 1, 0, domain.READY) for i in range(12)]
    edges.append(DomainEdge("rome", "milan", 4, 1, domain.DEGRADED))
    picture = layout(nodes, edges)
    placed = {p.node.id: p for p in picture.nodes}
    assert _distance(placed["rome"], placed["milan"]) > domain.BOX_W
    for i in range(12):
        mine, other = ("rome", "milan") if i < 6 else ("milan", "rome")
        assert _distance(placed[f"p{i}"], placed[mine]) < _distance(placed[f"p{i}"], placed[other])
    assert len({(p.x, p.y) for p in picture.nodes}) == len(nodes)


def test_the_picture_keeps_only_the_band_that_holds_something() -> None:
    """Two peers sit left and right of the managed cluster: the square's empty top and bottom are cut
    (the page draws ``top``..``top + height``); a full ring keeps the whole square."""
    few = layout(*star(2, consumers=2))
    assert 0 < few.height < few.size / 2
    for p in few.nodes:
        assert few.top + domain.MARGIN <= p.y - (domain.BOX_H / 2 if p.node.managed else few.peer_r)
        assert p.y + (domain.BOX_H / 2 if p.node.managed else few.peer_r) <= few.top + few.height - domain.MARGIN
    for e in few.edges:
        assert few.top < e.label_y < few.top + few.height
    full = layout(*star(20))
    assert full.height >= full.size - 2 * domain.MARGIN - 1


def test_edges_to_unknown_clusters_or_loops_are_left_out() -> None:
    edges = [DomainEdge("rome", "nowhere", 3, 0, domain.READY), DomainEdge("rome", "rome", 1, 0, domain.READY)]
    assert layout([LOCAL], edges).edges == []


def test_edge_health_says_ready_degraded_idle_or_unreachable() -> None:
    assert domain.edge_health(3, 0, True) == domain.READY
    assert domain.edge_health(3, 1, True) == domain.DEGRADED
    assert domain.edge_health(0, 0, True) == domain.IDLE
    assert domain.edge_health(3, 0, False) == domain.UNREACHABLE
    assert domain.peer_health("Unhealthy", "Healthy", "Healthy") == domain.UNREACHABLE
    assert domain.peer_health("Healthy", "Healthy", "Unhealthy") == domain.UNHEALTHY
    assert domain.peer_health("Healthy", "Healthy", "Disabled") == domain.HEALTHY
    assert domain.peer_health("", "", "") == domain.UNKNOWN


# --------------------------------------------------------------------------------------------------
# From the snapshot, and the page.


def _consumer_peer() -> None:
    """bologna consumes rome: two twin namespaces here (one terminating), and its tenant namespace."""
    Cluster.objects.create(
        cluster_id="bologna",
        name="bologna",
        role="Consumer",
        networking_status="Healthy",
        authentication_status="Healthy",
        offloading_status="Disabled",
    )
    label = {"liqo.io/remote-cluster-id": "bologna"}
    Namespace.objects.create(name="reports", labels=label, status_phase="Active")
    Namespace.objects.create(name="etl", labels=label, status_phase="Terminating")
    Namespace.objects.create(
        name="liqo-tenant-bologna", labels={**label, "liqo.io/tenant-namespace": "true"}, status_phase="Active"
    )


@pytest.mark.django_db
def test_the_graph_of_the_snapshot_has_an_edge_per_provider_and_per_consumer(fleet: Any) -> None:
    _consumer_peer()
    ClusterOffloading.objects.filter(cluster_id="naples").update(selected=True, state="CreationLoopBackOff")
    nodes, edges = local_domain()
    by_id = {n.id: n for n in nodes}
    assert by_id["rome"].managed and not by_id["milan"].managed
    assert by_id["naples"].health == domain.UNHEALTHY and by_id["milan"].health == domain.HEALTHY
    found = {(e.source, e.target): (e.namespaces, e.not_ready, e.health) for e in edges}
    assert found == {
        ("rome", "milan"): (1, 0, domain.READY),
        ("rome", "naples"): (1, 1, domain.DEGRADED),
        ("bologna", "rome"): (2, 1, domain.DEGRADED),  # the tenant namespace is not an offloaded one
    }


@pytest.mark.django_db
def test_an_unreachable_local_cluster_makes_its_edges_unreachable(fleet: Any) -> None:
    now = timezone.now()
    SnapshotState.touch(
        None, last_success_at=now - timezone.timedelta(minutes=5), last_attempt_at=now, last_error="connection refused"
    )
    nodes, edges = local_domain()
    assert nodes[0].health == domain.UNREACHABLE
    assert {e.health for e in edges} == {domain.UNREACHABLE}


def _svg(page: str) -> str:
    found = re.search(r'<svg id="domain-map".*?</svg>', page, re.S)
    assert found, "the page draws the map"
    return found.group(0)


@pytest.mark.django_db
def test_the_page_draws_the_edges_with_their_counts_and_links_and_lists_them(admin_client: Any, fleet: Any) -> None:
    _consumer_peer()
    url = reverse("offloading:domain_map")
    assert url == "/domain/"
    response = admin_client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    svg = _svg(page)
    edges = re.findall(
        r'<a href="([^"]*)" tabindex="-1" class="domain-edge" data-source="([^"]+)" data-target="([^"]+)" data-namespaces="(\d+)"',
        svg,
    )
    assert sorted((s, t, int(n)) for _u, s, t, n in edges) == [
        ("bologna", "rome", 2),
        ("rome", "milan", 1),
        ("rome", "naples", 0),
    ]
    links = {(s, t): u for u, s, t, _n in edges}
    assert links[("rome", "milan")] == "/namespaces/?cluster=milan"
    assert (
        links[("bologna", "rome")]
        == "/namespaces/?selector=liqo.io%2Fremote-cluster-id%3Dbologna%2C%21liqo.io%2Ftenant-namespace"
    )
    assert sorted(re.findall(r'class="edge-count">(\d+)</text>', svg)) == ["1", "2"], "no label on an idle edge"
    assert svg.count("marker-end=") == 3
    # Nodes: the managed cluster (a box) and its three peers (circles), each linked to its page.
    assert svg.count("<rect ") == 1 and 'class="domain-node domain-managed"' in svg
    for peer in ("milan", "naples", "bologna"):
        assert f'<a href="/clusters/{peer}/" class="domain-node domain-peer" data-cluster="{peer}"' in svg
    assert 'data-cluster="naples" data-health="unhealthy"' in svg
    # The table has the same edges, with links to the namespaces along them.
    table = page[page.index('id="domain-edges"') :]
    assert table.count("<tr data-source=") == 3
    assert '<a href="/namespaces/?cluster=milan">1</a>' in table
    assert "1 not Ready" in table and "some not Ready" in table
    assert 'id="live" data-live' in page and 'id="domain-legend"' in page
    # The selector the consumer's edge links to lists exactly its twins.
    listed = admin_client.get(links[("bologna", "rome")]).content.decode()
    assert "reports" in listed and "etl" in listed and "liqo-tenant-bologna" not in listed


@pytest.mark.django_db
def test_the_page_at_200_peers_folds_the_picture_and_lists_every_edge(admin_client: Any, fleet: Any) -> None:
    Cluster.objects.bulk_create(
        Cluster(cluster_id=f"peer-{i:03d}", name=f"peer-{i:03d}", role="Provider", networking_status="Healthy")
        for i in range(198)
    )
    page = admin_client.get(reverse("offloading:domain_map")).content.decode()
    svg = _svg(page)
    assert svg.count('class="domain-node domain-peer"') == domain.MAX_PEERS - 1
    assert svg.count('class="domain-node domain-more"') == 1
    hidden = 200 - (domain.MAX_PEERS - 1)
    assert f"+{hidden}</text>" in svg and f"and {hidden} more peers" in svg
    # naples (unhealthy) and milan (the one with a namespace) stay in the picture.
    assert 'data-cluster="naples"' in svg and 'data-cluster="milan"' in svg
    assert page.count("<tr data-source=") == 200


@pytest.mark.django_db
def test_the_page_needs_a_login(client: Any) -> None:
    response = client.get(reverse("offloading:domain_map"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.django_db
def test_cluster_names_are_escaped_in_the_picture_and_the_table(admin_client: Any, fleet: Any) -> None:
    Cluster.objects.filter(cluster_id="milan").update(name='<b onclick="x">milan&co</b>')
    page = admin_client.get(reverse("offloading:domain_map")).content.decode()
    assert "<b onclick" not in page
    svg = _svg(page)
    assert "&lt;b onclick=&quot;x&quot;&gt;milan&amp;co&lt;/b&gt;" in page  # whole, in the table and the tooltip
    assert "&gt;milan&amp;…</text>" in svg, "cut at LABEL_CHARS in the picture"


@pytest.mark.django_db
def test_a_poll_of_the_page_is_answered_304_while_nothing_changed(
    admin_client: Any, fleet: Any, monkeypatch: Any
) -> None:
    if connection.vendor == "postgresql":
        # PostgreSQL bumps the live counters when the writer commits (deferred triggers), which a test
        # inside one transaction never does: here they fire at the end of each statement.
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    url = reverse("offloading:domain_map")
    poll = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}
    first = admin_client.get(url, **poll)
    assert first.status_code == 200 and first["ETag"]
    assert admin_client.get(url, HTTP_IF_NONE_MATCH=first["ETag"], **poll).status_code == 304
    ClusterOffloading.objects.filter(cluster_id="naples").update(selected=True, state="NamespaceCreated")
    later = live.now_ms() + 5000  # the page's next poll, 5 s on: its render held for more than livetags.HOLD_S
    monkeypatch.setattr(live, "now_ms", lambda: later)
    again = admin_client.get(url, HTTP_IF_NONE_MATCH=first["ETag"], **poll)
    assert again.status_code == 200 and 'data-target="naples" data-namespaces="1"' in again.content.decode()


@pytest.mark.django_db
def test_an_empty_snapshot_draws_the_managed_cluster_alone(admin_client: Any) -> None:
    page = admin_client.get(reverse("offloading:domain_map")).content.decode()
    svg = _svg(page)
    assert 'data-cluster="local" data-health="unknown"' in svg and 'class="domain-edge"' not in svg
    assert "No edges: the snapshots have no peers" in page and "0 peers" in page


# --------------------------------------------------------------------------------------------------
# Several managed clusters: their views merged into one graph.


def _view(
    own: str, peers: dict[str, tuple[str, str]], edges: list[DomainEdge]
) -> tuple[list[DomainNode], list[DomainEdge]]:
    """One managed cluster's view as local_domain returns it: ``own`` first, then ``peers`` (id -> role, health)."""
    nodes = [DomainNode(own, own, managed=True, health=domain.HEALTHY)]
    nodes += [DomainNode(p, p, False, health, role) for p, (role, health) in peers.items()]
    return nodes, edges


def _edge(source: str, target: str, n: int, not_ready: int = 0) -> DomainEdge:
    return DomainEdge(source, target, n, not_ready, domain.edge_health(n, not_ready, True))


def test_a_peer_that_is_a_managed_cluster_is_one_node_and_a_shared_peer_is_one_node_with_its_worst_health() -> None:
    rome = _view(
        "rome",
        {"milan": ("ConsumerAndProvider", domain.HEALTHY), "bari": ("Provider", domain.HEALTHY)},
        [_edge("rome", "milan", 3), _edge("milan", "rome", 1), _edge("rome", "bari", 2)],
    )
    milan = _view(
        "milan",
        {"rome": ("ConsumerAndProvider", domain.UNREACHABLE), "bari": ("Consumer", domain.UNHEALTHY)},
        [_edge("milan", "rome", 1), _edge("rome", "milan", 3), _edge("bari", "milan", 4)],
    )
    whole = domain.merge([rome, milan])
    by_id = {n.id: n for n in whole.nodes}
    assert sorted(by_id) == ["bari", "milan", "rome"], "milan and rome once each, not again as peers"
    assert by_id["rome"].managed and by_id["milan"].managed and not by_id["bari"].managed
    assert by_id["rome"].health == domain.HEALTHY, "a managed cluster's health is its own snapshot's"
    assert by_id["bari"].health == domain.UNHEALTHY and by_id["bari"].role == "ConsumerAndProvider"
    assert [n.id for n in whole.nodes[:2]] == ["rome", "milan"], "the managed clusters first, in the views' order"
    assert whole.seen_by == {"rome": 0, "milan": 1, "bari": 0}


def test_an_edge_between_two_managed_clusters_is_drawn_once_per_direction_with_the_providers_count() -> None:
    # rome selected milan for 3 namespaces (1 not Ready yet); milan holds 2 twins of rome's so far.
    # milan offloads 1 to rome, and rome has its twin. rome offloads 2 to bari, which nobody manages.
    rome = _view(
        "rome",
        {"milan": ("ConsumerAndProvider", domain.HEALTHY), "bari": ("Provider", domain.HEALTHY)},
        [_edge("rome", "milan", 3, 1), _edge("milan", "rome", 1), _edge("rome", "bari", 2)],
    )
    milan = _view(
        "milan",
        {"rome": ("ConsumerAndProvider", domain.HEALTHY)},
        [_edge("milan", "rome", 1), _edge("rome", "milan", 2)],
    )
    whole = domain.merge([rome, milan])
    found = {(e.source, e.target): (e.namespaces, e.not_ready, e.health) for e in whole.edges}
    assert found == {
        ("rome", "milan"): (2, 1, domain.DEGRADED),  # milan's twins counted; rome's not-Ready one shows
        ("milan", "rome"): (1, 0, domain.READY),
        ("rome", "bari"): (2, 0, domain.READY),  # the consumer's count: the provider is not managed
    }
    assert len(whole.edges) == 3
    assert whole.counted_by == {("rome", "milan"): 1, ("milan", "rome"): 0, ("rome", "bari"): 0}
    # The provider's reading wins whichever view comes first.
    flipped = {(e.source, e.target): e.namespaces for e in domain.merge([milan, rome]).edges}
    assert flipped == {("rome", "milan"): 2, ("milan", "rome"): 1, ("rome", "bari"): 2}


def test_an_unreachable_reading_on_either_side_makes_the_merged_edge_unreachable() -> None:
    rome = _view(
        "rome", {"milan": ("Provider", domain.UNREACHABLE)}, [DomainEdge("rome", "milan", 2, 0, domain.UNREACHABLE)]
    )
    milan = _view("milan", {"rome": ("Consumer", domain.HEALTHY)}, [_edge("rome", "milan", 2)])
    (edge,) = domain.merge([rome, milan]).edges
    assert (edge.namespaces, edge.health) == (2, domain.UNREACHABLE)


def test_a_neighbourhood_keeps_one_cluster_its_peers_and_its_edges_with_the_same_counts() -> None:
    rome = _view(
        "rome", {"milan": ("Provider", domain.HEALTHY), "idle": ("", domain.UNKNOWN)}, [_edge("rome", "milan", 3)]
    )
    milan = _view(
        "milan",
        {"rome": ("Consumer", domain.HEALTHY), "bari": ("Provider", domain.HEALTHY)},
        [_edge("rome", "milan", 2), _edge("milan", "bari", 5)],
    )
    whole = domain.merge([rome, milan])
    near = domain.neighbourhood(whole, "rome", frozenset({"milan", "idle"}))
    assert sorted(n.id for n in near.nodes) == ["idle", "milan", "rome"], "bari is milan's, not rome's"
    assert [(e.source, e.target, e.namespaces) for e in near.edges] == [("rome", "milan", 2)]
    assert near.counted_by == {("rome", "milan"): 1}


def _milan_managed() -> Any:
    """milan managed too (the fleet fixture's rome offloads shop to it): its snapshot has rome as a
    consumer peer and the twin of rome's shop, and offloads its own ``orders`` to rome, whose twin rome
    holds (rome is not told of milan as a consumer: the edge comes from milan's rows alone)."""
    milan = ManagedCluster.objects.create(name="milan", context="milan", liqo_cluster_id="milan")
    SnapshotState.touch(milan, local_cluster_id="milan", last_success_at=timezone.now())
    SnapshotState.touch(None, last_success_at=timezone.now())
    Cluster.objects.create(
        managed=milan,
        cluster_id="rome",
        name="rome",
        role="ConsumerAndProvider",
        networking_status="Healthy",
        authentication_status="Healthy",
        offloading_status="Healthy",
    )
    Namespace.objects.create(managed=milan, name="shop", labels={"liqo.io/remote-cluster-id": "rome"})
    Namespace.objects.create(managed=milan, name="shop-extra", labels={"liqo.io/remote-cluster-id": "rome"})
    orders = Namespace.objects.create(managed=milan, name="orders", offloaded=True)
    ClusterOffloading.objects.create(
        namespace=orders, managed=milan, cluster_id="rome", selected=True, state="NamespaceCreated"
    )
    return milan


@pytest.mark.django_db
def test_the_whole_domain_page_draws_every_managed_cluster_once_with_the_providers_counts(
    admin_client: Any, fleet: Any
) -> None:
    _milan_managed()
    page = admin_client.get(reverse("offloading:domain_map")).content.decode()
    assert re.search(r"2 managed clusters \(<code>[^<]+</code>, <code>milan</code>\) · 1 peer ·", page), page[:3000]
    svg = _svg(page)
    assert svg.count('class="domain-node domain-managed"') == 2 and svg.count("<rect ") == 2
    assert 'data-cluster="milan"' in svg and svg.count('data-cluster="milan"') == 1
    assert svg.count('class="domain-node domain-peer"') == 1 and 'data-cluster="naples"' in svg
    edges = re.findall(
        r'<a href="([^"]*)" tabindex="-1" class="domain-edge" data-source="([^"]+)" data-target="([^"]+)" data-namespaces="(\d+)"',
        svg,
    )
    found = {(s, t): (int(n), u) for u, s, t, n in edges}
    assert len(edges) == len(found) == 3, "one arrow per direction"
    selector = "liqo.io%2Fremote-cluster-id%3Drome%2C%21liqo.io%2Ftenant-namespace"
    assert found == {
        ("rome", "milan"): (2, f"/m/milan/namespaces/?selector={selector}"),  # milan's twins, not rome's 1 selected
        ("milan", "rome"): (1, "/m/milan/namespaces/?cluster=rome"),  # rome's snapshot does not know it: milan's count
        ("rome", "naples"): (0, "/namespaces/?cluster=naples"),
    }
    assert '<a href="/m/milan/" class="domain-node domain-managed" data-cluster="milan"' in svg
    assert "(Liqo cluster id rome): managed cluster" in svg, "the default cluster's name is not its Liqo id here"
    assert '<a href="/clusters/naples/" class="domain-node domain-peer"' in svg
    table = page[page.index('id="domain-edges"') :]
    assert table.count("<tr data-source=") == 3
    # The twins the edge links to are the ones it counts.
    listed = admin_client.get(found[("rome", "milan")][1]).content.decode()
    assert "shop-extra" in listed and "orders" not in listed


@pytest.mark.django_db
def test_a_clusters_own_path_draws_its_neighbourhood_with_the_same_counts(admin_client: Any, fleet: Any) -> None:
    _milan_managed()
    response = admin_client.get("/m/milan/domain/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Liqo domain around <code>milan</code>" in page and '<a href="/domain/">The whole domain</a>' in page
    svg = _svg(page)
    assert 'data-cluster="naples"' not in svg, "naples peers rome only"
    drawn = sorted(re.findall(r'data-source="([^"]+)" data-target="([^"]+)" data-namespaces="(\d+)"', svg))
    assert drawn == [("milan", "rome", "1"), ("rome", "milan", "2")]
    assert admin_client.get("/m/nowhere/domain/").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("group", ["viewer", "operator"])
def test_a_viewer_and_an_operator_scoped_to_one_cluster_read_the_same_domain(
    client: Any, fleet: Any, django_user_model: Any, group: str
) -> None:
    """Reads are not scoped (an operator's scopes say what they may change, as on the namespace lists):
    a viewer, and an operator whose only scope is in milan, see the graph and counts an admin sees."""
    _milan_managed()
    user = django_user_model.objects.create_user("vera", password="vera-password-123")
    user.groups.add(Group.objects.get(name=group))
    if group == "operator":
        Scope.objects.create(user=user, kind="glob", value="milan/team-a-*")
    client.force_login(user)
    page = client.get(reverse("offloading:domain_map")).content.decode()
    drawn = sorted(re.findall(r'data-source="([^"]+)" data-target="([^"]+)" data-namespaces="(\d+)"', _svg(page)))
    assert drawn == [("milan", "rome", "1"), ("rome", "milan", "2"), ("rome", "naples", "0")]
