"""At a phone's width (420 px) each table shows its name column and its state or action column without
scrolling, a table that still scrolls sideways shows a shadow where there is more, and the topology
picture draws no text under 12 px; at 1440 px every column is there."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.models import Cluster, ClusterOffloading, Namespace
from tests.browser import htmx_idle, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The left and right edges of a row's cells, as the viewport shows them.
EDGES = """(selector) => Array.from(document.querySelectorAll(selector)).map(row => {
  const cells = Array.from(row.children).filter(c => getComputedStyle(c).display !== "none");
  return cells.map(c => { const r = c.getBoundingClientRect(); return [c.textContent.trim().slice(0, 40), r.left, r.right]; });
})"""

# The rendered size of each text of the topology picture: its font size times the picture's scale.
TOPOLOGY_TEXT = """() => Array.from(document.querySelectorAll(".topology-svg text")).map(t =>
  parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"""


def _long_fleet() -> None:
    """Names as long as real ones: a long namespace offloaded to a peer with a long id, whose network
    is down."""
    Cluster.objects.filter(cluster_id="naples").update(networking_status="Unhealthy")
    shop = Namespace.objects.get(name="shop")
    for i in range(3):
        cid = f"cluster-eu-south-{i:02d}-production"
        Cluster.objects.create(cluster_id=cid, name=cid, role="Provider", offloading_status="Healthy")
        ClusterOffloading.objects.create(namespace=shop, cluster_id=cid, selected=True, state="NamespaceCreated")
    Namespace.objects.create(name="payments-gateway-europe-production", labels={"team": "pay"})


def _fits(rows: list[list[Any]], width: int, columns: tuple[int, ...]) -> list[Any]:
    """The cells among ``columns`` (indexes in the visible cells, -1 the last) not fully in view."""
    out = []
    for cells in rows:
        for index in columns:
            text, left, right = cells[index]
            if left < 0 or right > width + 0.5:
                out.append((text, left, right))
    return out


def test_phone_tables_show_name_and_state_or_action(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
) -> None:
    _long_fleet()
    page = browser_page
    login(page, live_server)
    page.set_viewport_size({"width": 420, "height": 900})

    page.goto(f"{live_server.url}/namespaces/")
    htmx_idle(page)
    rows = page.evaluate(EDGES, "#namespace-table tbody tr")
    assert len(rows) == 3 and _fits(rows, 420, (0, 1, -1)) == [], rows
    assert [cells[-1][0] for cells in rows] == ["Offload", "Offload", "Edit"], "the action is the last visible cell"

    page.goto(f"{live_server.url}/clusters/")
    htmx_idle(page)
    rows = page.evaluate(EDGES, "#live tbody tr")
    assert len(rows) == 5 and _fits(rows, 420, (0, 1)) == [], rows
    naples = next(cells for cells in rows if cells[0][0].startswith("naples"))
    assert "networking Unhealthy" in naples[0][0], "the unhealthy module is said under the name"
    assert naples[1][0].startswith("Unhealthy"), "the offloading module's state is in view"

    page.goto(f"{live_server.url}/clusters/milan/")
    htmx_idle(page)
    for table in page.locator("main table").all():
        cells = table.evaluate(
            EDGES.replace("document.querySelectorAll(selector)", "this_.querySelectorAll('tbody tr')").replace(
                "(selector) =>", "(this_) =>"
            )
        )
        assert _fits([c for c in cells if len(c) > 1], 420, (0, 1)) == [], cells

    page.goto(f"{live_server.url}/namespaces/shop/")
    htmx_idle(page)
    rows = page.evaluate(EDGES, "#ns-status tbody tr")
    assert rows and _fits(rows, 420, (0, 1)) == [], "cluster and state in view"
    # This table is wider than the screen (the messages): it scrolls in its box, with a shadow.
    scrolls = page.evaluate(
        """() => { const t = document.querySelector('#ns-status table');
        return [t.scrollWidth > t.clientWidth, getComputedStyle(t).backgroundImage]; }"""
    )
    if scrolls[0]:
        assert "radial-gradient" in scrolls[1], "a table that scrolls sideways shows a shadow"

    page.goto(f"{live_server.url}/")
    htmx_idle(page)
    sizes = page.evaluate(TOPOLOGY_TEXT)
    assert sizes and min(sizes) >= 12, sizes
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, "the page itself"


def test_desktop_shows_every_column_and_large_topology_text(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
) -> None:
    _long_fleet()
    page = browser_page
    login(page, live_server)
    htmx_idle(page)
    assert page.locator("#namespace-table thead th:visible").count() == 8
    page.goto(f"{live_server.url}/clusters/")
    assert page.locator("#live thead th:visible").count() == 8
    assert page.locator(".phone-only:visible").count() == 0
    page.goto(f"{live_server.url}/")
    sizes = page.evaluate(TOPOLOGY_TEXT)
    assert sizes and min(sizes) >= 12, sizes


def test_the_preview_keeps_details_open_and_the_last_good_table(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
) -> None:
    """Typing in the offload form: the webhook and ClusterSelector sections stay as the user left them;
    a half-typed selector keeps the last good cluster table, greyed, under the error; a selector over
    the expression limit shows the error alone."""
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/payments/offload/")
    preview = page.locator("#preview")
    preview.get_by_text("2 of 2 clusters selected").wait_for()
    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west)")
    preview.get_by_text("1 of 2 clusters selected").wait_for()
    htmx_idle(page)
    page.click("#preview-webhook summary")
    page.click("#preview-node-selector summary")
    page.click("#preview-manifest summary")  # open by default: closed by the user, it stays closed
    is_open = "id => document.getElementById(id).open"
    for text in ("topology.kubernetes.io/region in (eu-west, eu-south)", "topology.kubernetes.io/region in (eu-west)"):
        page.fill("textarea[name=cluster_selector]", text)
        htmx_idle(page)
        assert page.evaluate(is_open, "preview-webhook") and page.evaluate(is_open, "preview-node-selector")
        assert not page.evaluate(is_open, "preview-manifest")

    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west")
    preview.get_by_text("Fix before submitting").wait_for()
    htmx_idle(page)
    stale = preview.locator("article.stale-preview")
    assert stale.count() == 1 and "1 of 2 clusters selected" in stale.inner_text()
    assert page.evaluate("getComputedStyle(document.querySelector('#preview .stale-preview')).opacity") < "1"
    assert preview.locator("#preview-errors").is_visible(), "the error above it"

    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west)")
    preview.get_by_text("1 of 2 clusters selected").wait_for()
    htmx_idle(page)
    assert preview.locator("article.stale-preview").count() == 0 and preview.locator("article.preview").count() == 1

    many = ",".join(f"k{i}=v" for i in range(60))  # one line: one term of 60 expressions
    page.fill("textarea[name=cluster_selector]", many)
    preview.get_by_text("Fix before submitting").wait_for()
    htmx_idle(page)
    text = preview.inner_text()
    assert "at most 50" in text and "clusters selected" not in text, "the limit error alone"
