"""The domain map of a real three-cluster domain in Chromium (issue 28): rome, milan and naples, all three
managed, served by ``python -m sandbox serve --scenario domain:rome,milan,naples``, their rows written by
a watcher process (tests/fixtures/domain.py). The whole domain's map (``/domain/``) draws the three as three
managed nodes (none again as a peer), an arrow consumer -> provider for each direction of each peering
of the mesh, once, and each arrow's count is what the provider's own API server holds: the twin
namespaces that the consumer's offloadings made there (``kubectl get namespaces -l
liqo.io/remote-cluster-id=<consumer>`` in the provider's context). An offload made meanwhile adds one
to its arrows. A cluster's own path (``/m/milan/domain/``) draws the arrows that touch it, with the same
counts. The screenshot (1440 px) goes to docs/screenshots/domain-map-3-clusters.png."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from liqo_rules.constants import REMOTE_CLUSTER_ID_LABEL, TENANT_NAMESPACE_PREFIX
from offloading.choices import ChangeState
from offloading.models import ChangeRequest, Cluster, Namespace
from tests.browser import htmx_idle, login
from tests.fixtures.domain import Fleet

DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
CLUSTERS = ["rome", "milan", "naples"]


def _twins(fleet: Fleet, provider: str, consumer: str) -> int:
    """The namespaces ``consumer`` offloaded to ``provider``, as ``provider``'s API server has them."""
    done = fleet.kubectl(provider, "get", "namespaces", "-l", f"{REMOTE_CLUSTER_ID_LABEL}={consumer}", "-o", "json")
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    return sum(1 for ns in items if not ns["metadata"]["name"].startswith(TENANT_NAMESPACE_PREFIX))


def _drawn(page: Any) -> dict[tuple[str, str], int]:
    """The arrows of the picture: (consumer, provider) -> the count drawn on it."""
    found = page.eval_on_selector_all(
        "#domain-map a.domain-edge",
        "els => els.map(e => [e.dataset.source, e.dataset.target, Number(e.dataset.namespaces),"
        " (e.querySelector('text.edge-count') || {}).textContent || ''])",
    )
    edges = {}
    for source, target, count, text in found:
        assert text in ("", str(count)), (source, target, count, text)  # the number on the arrow is its count
        edges[(source, target)] = count
    return edges


def test_the_domain_map_of_three_managed_clusters_draws_each_peering_once_each_way_with_the_providers_counts(
    start_fleet: Any, live_server: Any, admin_user: Any, browser_page: Any
) -> None:
    fleet = start_fleet(CLUSTERS)
    rome = fleet.managed["rome"]

    def truth() -> dict[tuple[str, str], int]:
        """Every direction of the mesh: consumer -> provider, counted in the provider's API server."""
        return {(a, b): _twins(fleet, b, a) for a in CLUSTERS for b in CLUSTERS if a != b}

    expected = truth()
    assert all(expected[("rome", b)] and expected[(b, "rome")] for b in CLUSTERS[1:]), (
        f"the demo domain offloads along every edge of rome: {expected}"
    )
    for name in CLUSTERS:
        managed = fleet.managed[name]
        fleet.until(
            lambda managed=managed: (
                Cluster.objects.of(managed).count() == 2
                and Namespace.objects.of(managed).filter(offloaded=True).exists()
            ),
            30,
            f"{name}'s peers and offloadings in the snapshot",
        )
    page = browser_page
    login(page, live_server)

    def drawn_now(path: str = "/domain/") -> dict[tuple[str, str], int]:
        page.goto(f"{live_server.url}{path}")
        htmx_idle(page)
        return _drawn(page)

    fleet.until(lambda: drawn_now() == expected, 30, f"the map to draw {expected}", interval=1)
    expect(page.locator(".page-head p")).to_contain_text("3 managed clusters (")
    expect(page.locator(".page-head p")).to_contain_text("· 0 peers ·")
    svg = page.locator("#domain-map")
    expect(svg.locator("a.domain-node.domain-managed")).to_have_count(3)
    expect(svg.locator("a.domain-node.domain-peer")).to_have_count(0)
    for name in CLUSTERS:  # each cluster once, whoever else peers with it
        expect(svg.locator(f'a.domain-node[data-cluster="{name}"]')).to_have_count(1)
    expect(svg.locator('a.domain-node[data-health="healthy"]')).to_have_count(3)
    # Once per direction: six arrows, six rows, no pair twice.
    expect(svg.locator("a.domain-edge")).to_have_count(6)
    expect(page.locator("#domain-edges tbody tr")).to_have_count(6)
    for (source, target), count in expected.items():
        row = page.locator(f'#domain-edges tbody tr[data-source="{source}"][data-target="{target}"]')
        expect(row.locator("td").nth(2)).to_have_text(str(count))
    # An arrow points at its provider: its line ends nearer the provider's node than the consumer's.
    ends = page.evaluate(
        """() => {
          const centre = (id) => { const r = document.querySelector(`#domain-map a.domain-node[data-cluster="${id}"]`)
            .getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; };
          return [...document.querySelectorAll('#domain-map a.domain-edge')].map((e) => {
            const l = e.querySelector('line, path'); const box = l.getBBox(); const m = l.getScreenCTM();
            const end = l.tagName === 'line' ? [l.x2.baseVal.value, l.y2.baseVal.value] : null;
            const p = end ? new DOMPoint(end[0], end[1]).matrixTransform(m) : null;
            const d = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1]);
            return p ? d([p.x, p.y], centre(e.dataset.target)) < d([p.x, p.y], centre(e.dataset.source)) : null;
          });
        }"""
    )
    assert ends and all(ends), ends
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_SCREENSHOTS / "domain-map-3-clusters.png"), full_page=True)
    # An arrow between two managed clusters opens the provider's twins of the consumer, in its pages.
    svg.locator('a.domain-edge[data-source="rome"][data-target="milan"] text.edge-count').click()
    page.wait_for_url(re.compile(rf"{re.escape(live_server.url)}/m/milan/namespaces/\?selector="))
    expect(page.locator("#namespace-table tbody tr")).to_have_count(expected[("rome", "milan")])
    # milan's own path: the four arrows that touch it, counted as on the whole domain's map.
    around = {edge: count for edge, count in expected.items() if "milan" in edge}
    assert drawn_now("/m/milan/domain/") == around
    expect(page.locator("h2")).to_contain_text("around milan")

    # One more offload from rome, to its providers: each of rome's arrows to a provider counts one more,
    # as the providers' API servers do.
    fleet.create_namespace("rome", "reports")
    fleet.until(lambda: Namespace.objects.of(rome).filter(name="reports").exists(), 20, "rome's new namespace")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    response = api.put(
        f"/api/v1/m/{rome.name}/namespaces/reports/offloading/", {"podOffloadingStrategy": "Remote"}, format="json"
    )
    assert response.status_code == 202, response.json()
    pk = response.json()["id"]
    fleet.until(lambda: ChangeRequest.objects.get(pk=pk).state == ChangeState.APPLIED, 30, "the offload of reports")
    # Applied is the NamespaceOffloading's create; the providers' twins follow from the sandbox's controllers.
    grown = {edge: count + (1 if edge[0] == "rome" else 0) for edge, count in expected.items()}
    fleet.until(lambda: truth() == grown, 30, f"the providers' twins of reports: {grown}", interval=0.5)
    fleet.until(lambda: drawn_now() == grown, 30, f"the map to draw {grown}", interval=1)
