"""The overview (home page, with the topology picture) and the page of one peer."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from offloading.models.inventory import Pod
from offloading.views.insight import CENTER, RADIAL_RADIUS, RADIUS, ring, topology

pytestmark = pytest.mark.django_db


def test_the_overview_draws_the_peers_around_the_local_cluster(admin_client: Any, fleet: Any) -> None:
    Pod.objects.create(namespace="shop", name="web-1", node_name="milan", cluster_id="milan", phase="Running")
    page = admin_client.get(reverse("offloading:home")).content.decode()
    assert "<svg" in page and 'role="group"' in page
    assert page.count("<circle cx=") == 3, "the local cluster and two peers"
    assert 'class="peer bad"' in page, "naples' offloading module is unhealthy"
    assert reverse("offloading:cluster_detail", args=["milan"]) in page
    assert "1 pod running" in page and "Local cluster <code>rome</code>" in page
    assert "naples: offloading unhealthy" in page


def test_the_layout_keeps_fifty_peers_on_the_circle_with_outward_labels() -> None:
    from offloading.models import Cluster

    clusters = [Cluster(cluster_id=f"peer-{i}", offloading_status="Healthy") for i in range(50)]
    nodes = topology(clusters, {"peer-0": 10, "peer-1": 5}, {})
    radius, _node, size = ring(50)
    assert radius == RADIAL_RADIUS < RADIUS and 6 <= size <= 12
    for node in nodes:
        distance = ((node.x - CENTER) ** 2 + (node.y - CENTER) ** 2) ** 0.5
        assert abs(distance - radius) < 0.2
        assert ((node.label_x - CENTER) ** 2 + (node.label_y - CENTER) ** 2) ** 0.5 > distance
        # A label along its radius, never upside down, ending inside the picture even at 18 characters.
        assert -90 <= node.rotate <= 90
        assert radius + 9 + 6 + 18 * 0.6 * size <= CENTER
    assert nodes[0].width == 8.0 and nodes[1].width == 4.5 and nodes[2].width == 0.6
    assert {n.anchor for n in nodes} == {"start", "end"}
    # Neighbouring labels are at least a font size apart along the circle: no overlap.
    gap = ((nodes[0].label_x - nodes[1].label_x) ** 2 + (nodes[0].label_y - nodes[1].label_y) ** 2) ** 0.5
    assert gap >= size


def test_a_few_peers_keep_horizontal_labels_around_the_big_circle() -> None:
    from offloading.models import Cluster

    nodes = topology([Cluster(cluster_id=f"peer-{i}") for i in range(5)], {}, {})
    assert ring(5)[0] == RADIUS
    assert {n.rotate for n in nodes} == {0.0} and {n.anchor for n in nodes} == {"start", "end", "middle"}


def test_the_cluster_page_shows_capacity_hosted_namespaces_and_pods(admin_client: Any, fleet: Any) -> None:
    Pod.objects.create(
        namespace="shop",
        name="web-1",
        node_name="milan",
        cluster_id="milan",
        phase="Running",
        cpu_millis=2000,
        memory_bytes=8 * 1024**3,
    )
    page = admin_client.get(reverse("offloading:cluster_detail", args=["milan"])).content.decode()
    assert "CPU <strong>2</strong> of 8 (25%)" in page
    assert "<strong>8Gi</strong> of 32Gi (25%)" in page
    assert "nearly full" not in page
    assert 'href="/namespaces/shop/"' in page and "web-1" in page
    assert admin_client.get(reverse("offloading:cluster_detail", args=["nowhere"])).status_code == 404


def test_the_cluster_page_shows_what_a_consumer_peer_offloads_here(admin_client: Any, fleet: Any) -> None:
    from offloading.models import Cluster, Namespace

    url = reverse("offloading:cluster_detail", args=["milan"])
    Cluster.objects.filter(cluster_id="milan").update(role="Provider")
    page = admin_client.get(url).content.decode()
    assert "does not consume this cluster's resources (role Provider)" in page

    Cluster.objects.filter(cluster_id="milan").update(role="ConsumerAndProvider")
    Namespace.objects.create(name="liqo-tenant-milan", labels={"liqo.io/remote-cluster-id": "milan"})
    Namespace.objects.create(name="orders-milan", labels={"liqo.io/remote-cluster-id": "milan"}, status_phase="Active")
    Namespace.objects.create(name="billing-naples", labels={"liqo.io/remote-cluster-id": "naples"})
    page = admin_client.get(url).content.decode()
    tenant = page[page.index('id="tenant"') :]
    assert '<td>orders-milan</td><td><span class="badge ok" title="">Active</span></td>' in tenant
    assert "billing-naples" not in tenant  # another peer's twin
    assert "<td>liqo-tenant-milan</td>" not in tenant and "<code>liqo-tenant-milan</code>" in tenant
