"""The insight pages in Chromium, on the demo fleet of the sandbox read the way the watcher reads it: the
overview's topology (every peer drawn, the unhealthy one marked, a click on a peer opens its page), the
page of a peer (modules, virtual nodes with capacity, hosted namespaces, pods), and the namespace page
(its pods, and what is stuck with the fix)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from offloading.cluster import kube
from offloading.models import Cluster
from tests.browser import login
from tests.test_diagnosis_scenarios import sync_snapshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PEERS = ("bologna", "florence", "milan", "naples", "turin")


@pytest.fixture
def demo(tmp_path: Path, settings: Any) -> Iterator[Any]:
    """The demo fleet (sandbox/scenarios/demo.yaml), synced into the snapshot."""
    from sandbox import Sandbox

    with Sandbox(scenario="demo", controller_delay=0.0, port=0) as sb:
        kubeconfig = sb.write_kubeconfig(tmp_path / "kubeconfig")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        sb.wait_idle(10)
        sync_snapshot()
        yield sb
    kube.reset_client()


def test_the_overview_draws_every_peer_marks_the_unhealthy_one_and_links_to_its_page(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    demo: Any,
) -> None:
    assert sorted(Cluster.objects.values_list("cluster_id", flat=True)) == list(PEERS)
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/")
    svg = page.locator("svg.topology-svg")
    expect(svg.locator("title").first).to_have_text("The local cluster and its 5 peers")
    expect(svg.locator("circle.peer")).to_have_count(5)
    for peer in PEERS:
        expect(svg.locator(f'a[href="/clusters/{peer}/"] text.peer-label')).to_have_text(peer)
    # florence's offloading module is not ready: its node and its edge are red, and it needs attention.
    expect(svg.locator("circle.peer.bad")).to_have_count(1)
    expect(svg.locator('a[href="/clusters/florence/"] circle')).to_have_class("peer bad")
    expect(svg.locator('a[href="/clusters/milan/"] circle')).to_have_class("peer")
    # bologna only consumes (its offloading module is Disabled): nothing to offload to, but not unhealthy.
    expect(svg.locator('a[href="/clusters/bologna/"] circle')).to_have_class("peer")
    attention = page.locator("article", has=page.locator("header", has_text="Needs attention"))
    expect(attention.locator("a.badge.bad")).to_have_text(["florence: offloading unhealthy"])
    expect(page.locator(".page-head")).to_contain_text("5 peers (4 healthy)")
    # The picture is visible at this size and the peers do not overlap.
    boxes = [svg.locator(f'a[href="/clusters/{peer}/"] circle').bounding_box() for peer in PEERS]
    assert all(box and box["width"] > 10 for box in boxes), boxes
    centres = [(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2) for b in boxes if b]
    assert min(abs(a[0] - b[0]) + abs(a[1] - b[1]) for i, a in enumerate(centres) for b in centres[i + 1 :]) > 30
    svg.locator('a[href="/clusters/milan/"] circle').click()
    page.wait_for_url(f"{live_server.url}/clusters/milan/")
    expect(page.locator("h2")).to_have_text("milan")


def test_the_cluster_page_shows_modules_virtual_nodes_hosted_namespaces_and_pods(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    demo: Any,
) -> None:
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/clusters/milan/")
    modules = page.locator("section", has=page.locator("h3", has_text="Modules"))
    for module in ("networking", "authentication", "offloading"):
        expect(modules.locator("tr", has_text=module).locator(".badge").first).to_have_text("Healthy")
    nodes = page.locator("section", has=page.locator("h3", has_text="Virtual nodes and capacity"))
    node = nodes.locator("tbody tr").first
    expect(node).to_contain_text("milan")
    expect(node).to_contain_text("cpu: 64")
    expect(node).to_contain_text("topology.kubernetes.io/region=eu-south-1")
    expect(nodes).to_contain_text(re.compile(r"CPU [0-9.]+ of 64 \(\d+%\)"))
    hosted = page.locator("section", has=page.locator("h3", has_text="Namespaces hosted"))
    ready = hosted.locator("tr", has_text="web-frontend")
    expect(ready).to_contain_text("NamespaceCreated")
    expect(hosted.locator("tr", has_text="checkout-prod")).to_contain_text("CreationLoopBackOff")
    pods = page.locator("section", has=page.locator("h3", has_text="Pods running here"))
    expect(pods.locator("tbody tr", has_text="web-frontend").first).to_contain_text("Running")
    ready.locator("a").click()
    page.wait_for_url(f"{live_server.url}/namespaces/web-frontend/")


def test_the_namespace_page_lists_its_pods_and_says_what_is_stuck_with_the_fix(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    demo: Any,
    settings: Any,
) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "DIAGNOSIS_STUCK_MINUTES": 0}
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/checkout-prod/")
    diagnosis = page.locator("#diagnosis")
    loop = diagnosis.locator(".banner", has_text="cannot be created on milan")
    expect(loop).to_contain_text("already exists on the peer")
    expect(loop.locator("em")).to_have_text("Fix:")
    expect(loop).to_contain_text("offload again with another mapping (SelectedName)")
    expect(diagnosis.locator(".banner", has_text="SomeFailed for more than 0 minutes")).to_contain_text(
        "milan: CreationLoopBackOff"
    )
    pods = page.locator("#pods tbody tr")
    expect(pods).to_have_count(3)
    expect(pods.first).to_contain_text("Running")
    # A Ready namespace with its pods on a peer: no diagnosis at all.
    page.goto(f"{live_server.url}/namespaces/web-frontend/")
    expect(page.locator("#pods tbody tr")).to_have_count(4)
    expect(page.locator("#pods .chip.info", has_text="milan").first).to_be_visible()
    expect(page.locator("#diagnosis")).to_have_count(0)
