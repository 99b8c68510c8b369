"""The Liqo domain map in Chromium, on generated fleets of 20, 50 and 200 peers served by the sandbox and
read the way the watcher reads them: every drawn peer links to its page, the counts on the arrows do not
overlap, the picture is drawn at its natural size (12 px names), past 120 peers the quiet ones fold into
one node, and the table lists every edge. Screenshots go to docs/screenshots/domain-map-*.png."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from offloading.cluster import kube
from offloading.insight import domain
from offloading.models import Cluster, ClusterOffloading, ManagedCluster, Namespace, SnapshotState
from offloading.models.fleet import default_managed_pk
from sandbox import Sandbox
from tests.browser import login, sign_in
from tests.test_diagnosis_scenarios import sync_snapshot
from tests.test_layout import _axe, context  # noqa: F401 - the axe helper, and the fixture of a CSP-free context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"

# The counts on the arrows: none may cover another (horizontal text, so their boxes are exact).
OVERLAPPING_COUNTS = """() => {
  const boxes = [...document.querySelectorAll("#domain-map text.edge-count")].map((t) => t.getBoundingClientRect());
  const hits = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) hits.push([i, j]);
  }
  return {count: boxes.length, hits: hits.length};
}"""


@contextmanager
def generated_fleet(tmp_path: Path, settings: Any, peers: int) -> Iterator[None]:
    """A generated fleet (sandbox.fleet: 10 namespaces a peer, a tenth offloaded by region and provider)
    synced into the snapshot, with a few peers made eventful as a real domain has them: two whose
    offloading module is unhealthy, one unreachable, one where a namespace is not Ready, and two that
    also consume this cluster."""
    with Sandbox(scenario=f"generated:{peers * 10}x{peers}", controller_delay=0.0, port=0) as sb:
        kubeconfig = sb.write_kubeconfig(tmp_path / f"kubeconfig-{peers}")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        sb.wait_idle(60)
        with transaction.atomic():  # as the watcher's writer applies (this test commits: PostgreSQL locks rows)
            sync_snapshot()
        now = timezone.now()  # the watcher's mark of a good sync: the managed cluster is reachable
        SnapshotState.touch(None, last_success_at=now, last_attempt_at=now, last_error="")
        ids = sorted(Cluster.objects.values_list("cluster_id", flat=True))
        assert len(ids) == peers
        Cluster.objects.filter(cluster_id__in=ids[3:5]).update(offloading_status="Unhealthy")
        Cluster.objects.filter(cluster_id=ids[7]).update(networking_status="Unhealthy")
        Cluster.objects.filter(cluster_id__in=ids[10:12]).update(role="ConsumerAndProvider")
        stuck = ClusterOffloading.objects.filter(cluster_id=ids[15], selected=True).order_by("pk")[:1]
        assert ClusterOffloading.objects.filter(pk__in=stuck).update(state="CreationLoopBackOff") == 1
        for consumer in ids[10:12]:
            for name in ("reports", "etl"):
                Namespace.objects.create(
                    name=f"{name}-{consumer}", labels={"liqo.io/remote-cluster-id": consumer}, status_phase="Active"
                )
        yield
    kube.reset_client()


def test_the_domain_map_stays_readable_at_20_50_and_200_peers(
    browser_page: Any, live_server: Any, admin_user: Any, tmp_path: Path, settings: Any
) -> None:
    page = browser_page
    login(page, live_server)
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for peers in (20, 50, 200):
        with generated_fleet(tmp_path, settings, peers):
            page.goto(f"{live_server.url}/domain/")
            svg = page.locator("#domain-map")
            drawn = min(peers, domain.MAX_PEERS - 1)
            expect(svg.locator("a.domain-node.domain-peer")).to_have_count(drawn)
            expect(svg.locator("a.domain-node.domain-managed")).to_have_count(1)
            expect(svg.locator("a.domain-node.domain-more")).to_have_count(0 if peers <= domain.MAX_PEERS else 1)
            # Every edge of the domain is in the table: one per provider, one more per consumer.
            expect(page.locator("#domain-edges tbody tr")).to_have_count(peers + 2)
            # The unhealthy and unreachable peers are drawn, and say so.
            expect(svg.locator('a.domain-node[data-health="unhealthy"]')).to_have_count(2)
            expect(svg.locator('a.domain-node[data-health="unreachable"]')).to_have_count(1)
            expect(svg.locator('a.domain-edge[data-health="unreachable"]')).to_have_count(1)
            expect(svg.locator('a.domain-edge[data-health="degraded"]')).to_have_count(1)
            expect(page.locator("#domain-edges tbody tr").nth(1)).to_contain_text("1 not Ready")
            # Drawn at its natural size: a name is 12 px on the screen, never shrunk to fit.
            scale = page.evaluate(
                "() => { const s = document.getElementById('domain-map');"
                " return s.getBoundingClientRect().width / s.viewBox.baseVal.width; }"
            )
            assert abs(scale - 1) < 0.01, scale
            counts = page.evaluate(OVERLAPPING_COUNTS)
            assert counts["count"] > 0 and counts["hits"] == 0, counts
            # The picture, its legend and the first rows of the table (the rest is a long table).
            table = page.locator("#domain-edges").bounding_box()
            assert table
            clip = {"x": 0, "y": 0, "width": 1440, "height": table["y"] + 330}
            page.screenshot(path=str(DOCS_SCREENSHOTS / f"domain-map-{peers}.png"), full_page=True, clip=clip)
            if peers == 200:
                more = svg.locator("a.domain-node.domain-more")
                expect(more.locator("text").first).to_have_text(f"+{200 - drawn}")
                more.click()
                expect(page).to_have_url(re.compile(r"#domain-edges$"))
            else:
                # An arrow's count opens the namespaces offloaded along it; a peer opens its page.
                edge = svg.locator("a.domain-edge", has=page.locator("text.edge-count")).first
                target, count = edge.get_attribute("data-target"), edge.get_attribute("data-namespaces")
                edge.locator("text.edge-count").click()
                page.wait_for_url(f"{live_server.url}/namespaces/?cluster={target}")
                expect(page.locator("#namespace-table tbody tr")).to_have_count(int(count or 0))
                page.go_back()
                svg.locator(f'a.domain-node.domain-peer[data-cluster="{target}"] circle').click()
                page.wait_for_url(f"{live_server.url}/clusters/{target}/")
                expect(page.locator("h2")).to_have_text(str(target))


@pytest.mark.parametrize("width", [420, 1440])
def test_the_domain_map_does_not_scroll_sideways_and_axe_finds_nothing_serious(
    context: Any,  # noqa: F811 - the fixture imported above
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    width: int,
) -> None:
    """As tests/test_layout.py checks the other pages: on a phone the picture scrolls inside its own box
    (its names stay 12 px), not the page."""
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server)
    page.goto(f"{live_server.url}/domain/")
    expect(page.locator("#domain-map a.domain-node.domain-peer")).to_have_count(2)
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    assert _axe(page) == []


def several_managed(managed: int, peers_each: int) -> list[str]:
    """A domain of ``managed`` managed clusters (``m00`` the default, then ``m01``...), their rows as
    each one's watcher writes them: each peers with its two neighbours on a ring of the managed
    clusters both ways, and with ``peers_each`` peers nobody here manages, half of them shared with
    the next managed cluster (its second half). Along an edge to a managed provider, the consumer's
    selected offloadings and the provider's twins; to an unmanaged one, the offloadings. A few
    are troubled: a namespace not Ready, an unhealthy and an unreachable peer. Returns the managed
    clusters' Liqo ids."""
    default = ManagedCluster.objects.get(pk=default_managed_pk())
    now = timezone.now()
    rows = [default] + [ManagedCluster.objects.create(name=f"m{i:02d}", context=f"m{i:02d}") for i in range(1, managed)]
    ids = [f"m{i:02d}" for i in range(managed)]
    half = peers_each // 2
    for i, row in enumerate(rows):
        SnapshotState.touch(row, local_cluster_id=ids[i], last_success_at=now, last_attempt_at=now, last_error="")
        neighbours = sorted({ids[(i + 1) % managed], ids[(i - 1) % managed]} - {ids[i]})
        outside = [f"p{(i * half + k) % (managed * half):03d}" for k in range(peers_each)]
        for peer in neighbours:
            Cluster.objects.create(
                managed=row,
                cluster_id=peer,
                name=peer,
                role="ConsumerAndProvider",
                networking_status="Healthy",
                authentication_status="Healthy",
                offloading_status="Healthy",
            )
        for k, peer in enumerate(outside):
            Cluster.objects.create(
                managed=row,
                cluster_id=peer,
                name=f"edge-site-{peer}",
                role="Provider",
                networking_status="Unhealthy" if (i, k) == (0, 3) else "Healthy",
                authentication_status="Healthy",
                offloading_status="Unhealthy" if (i, k) == (1 % managed, 5) else "Healthy",
            )
        for j, provider in enumerate(neighbours + outside):
            for n in range(1 + (i + j) % 3):
                name = f"app-{provider}-{n}"
                namespace = Namespace.objects.create(managed=row, name=name, offloaded=True)
                state = "CreationLoopBackOff" if (i, j, n) == (0, 2, 0) else "NamespaceCreated"
                ClusterOffloading.objects.create(
                    managed=row, namespace=namespace, cluster_id=provider, selected=True, state=state
                )
                if provider in ids:  # its twin, in the provider's own snapshot
                    Namespace.objects.create(
                        managed=rows[ids.index(provider)],
                        name=f"{name}-of-{ids[i]}",
                        labels={"liqo.io/remote-cluster-id": ids[i]},
                        status_phase="Active",
                    )
    return ids


@pytest.mark.parametrize(("managed", "peers_each"), [(3, 20), (10, 20)])
def test_a_domain_of_several_managed_clusters_stays_readable(
    browser_page: Any, live_server: Any, admin_user: Any, managed: int, peers_each: int
) -> None:
    ids = several_managed(managed, peers_each)
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/domain/")
    head = page.locator(".page-head p")
    expect(head).to_contain_text(f"{managed} managed clusters (")
    outside = managed * (peers_each // 2)  # each shared by two managed clusters
    expect(head).to_contain_text(f"· {outside} peers ·")
    svg = page.locator("#domain-map")
    expect(svg.locator("a.domain-node.domain-managed")).to_have_count(managed)
    expect(svg.locator("a.domain-node.domain-peer")).to_have_count(min(outside, domain.MAX_PEERS))
    for cluster in ids:
        expect(svg.locator(f'a.domain-node[data-cluster="{cluster}"]')).to_have_count(1)
    # Between two managed clusters, one arrow each way; every peering in the table.
    ring = 2 * managed  # each managed cluster consumes from both its neighbours
    expect(page.locator("#domain-edges tbody tr")).to_have_count(ring + managed * peers_each)
    expect(svg.locator(f'a.domain-edge[data-source="{ids[0]}"][data-target="{ids[1]}"]')).to_have_count(1)
    expect(svg.locator(f'a.domain-edge[data-source="{ids[1]}"][data-target="{ids[0]}"]')).to_have_count(1)
    expect(svg.locator('a.domain-node[data-health="unreachable"]')).to_have_count(1)
    expect(svg.locator('a.domain-edge[data-health="degraded"]')).to_have_count(1)
    # The picture, its legend and the first rows of the table, before the checks of the drawing.
    table = page.locator("#domain-edges").bounding_box()
    assert table
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    clip = {"x": 0, "y": 0, "width": 1440, "height": table["y"] + 330}
    page.screenshot(path=str(DOCS_SCREENSHOTS / f"domain-map-{managed}x{peers_each}.png"), full_page=True, clip=clip)
    scale = page.evaluate(
        "() => { const s = document.getElementById('domain-map');"
        " return s.getBoundingClientRect().width / s.viewBox.baseVal.width; }"
    )
    assert abs(scale - 1) < 0.01, scale
    counts = page.evaluate(OVERLAPPING_COUNTS)
    assert counts["count"] > 0 and counts["hits"] == 0, counts
    # No managed cluster's box covers another's, nor a peer's circle.
    covered = page.evaluate(
        """() => {
          const boxes = [...document.querySelectorAll('#domain-map a.domain-node rect, #domain-map a.domain-node circle')]
            .map((e) => e.getBoundingClientRect());
          let hits = 0;
          for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i], b = boxes[j];
            if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) hits++;
          }
          return hits;
        }"""
    )
    assert covered == 0, covered
