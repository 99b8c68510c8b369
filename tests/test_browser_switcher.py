"""The cluster switcher in the real browser (offloading/switcher.py): three managed clusters of 300
namespaces each; from milan's namespace list the keyboard alone opens the switcher and goes to the same
list in another cluster, which shows only that cluster's rows; screenshots at 1440 and 420 px
(``screenshots/issue28-switcher-*.png``)."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.models import ManagedCluster, Namespace, SnapshotState
from tests.browser import SCREENSHOTS, htmx_idle, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CLUSTERS = ("default", "milan", "turin")
PER_CLUSTER = 300


def _fleet() -> None:
    SnapshotState.touch(None, local_cluster_id="rome")
    for name in CLUSTERS[1:]:
        ManagedCluster.objects.create(name=name, context=name)
    for cluster in ManagedCluster.objects.all():
        SnapshotState.touch(cluster, local_cluster_id=f"{cluster.name}-id")
        Namespace.objects.bulk_create(
            Namespace(managed=cluster, name=f"{cluster.name[:3]}-team-{i:03d}", labels={"team": f"t{i % 7}"})
            for i in range(PER_CLUSTER)
        )


def test_the_keyboard_switches_to_the_same_page_of_another_cluster(
    browser_page: Any, live_server: Any, admin_user: Any
) -> None:
    _fleet()
    page = browser_page
    login(page, live_server)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1440, 420):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/m/milan/namespaces/")
        htmx_idle(page)
        assert page.locator("tbody tr").first.inner_text().startswith("mil-team-000")
        summary = page.locator("#cluster-switcher summary")
        assert "milan" in summary.inner_text()
        summary.focus()
        page.keyboard.press("Enter")  # a <details>: Enter and Space open it
        assert page.locator("#cluster-switcher").get_attribute("open") is not None
        page.screenshot(path=str(SCREENSHOTS / f"issue28-switcher-{width}.png"), full_page=False)
        page.keyboard.press("Escape")
    # Tab from the summary to the first other cluster, Enter follows it: turin's namespace list.
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/m/milan/namespaces/?q=team-00")
    summary = page.locator("#cluster-switcher summary")
    summary.focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent.trim()") == "default"
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # past milan (this cluster) to turin
    assert page.evaluate("document.activeElement.textContent.trim()") == "turin"
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/m/turin/namespaces/?q=team-00")
    htmx_idle(page)
    rows = page.locator("tbody tr td:first-child a").all_inner_texts()
    assert rows and all(name.startswith("tur-team-00") for name in rows)
    assert "turin" in page.locator("#cluster-switcher summary").inner_text()
