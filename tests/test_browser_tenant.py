"""The tenant side of a peer's page in Chromium: what the consumer peers of the demo fleet offload into
this cluster, read by the real watcher (every watched kind listed, then watched) from the sandbox over
HTTP. A consumer's page lists the twins Liqo created here with their phase and names the peering's
tenant namespace; a twin the peer withdraws shows Terminating while something holds it, then leaves the
page; a new one appears; a peer that only provides says nothing is offloaded here from it."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from offloading.models import Cluster, Namespace
from sandbox import Sandbox, tenants
from sandbox.kinds import CONFIG_MAPS, NAMESPACES
from tests.browser import SCREENSHOTS, login
from tests.fixtures.waits import wait_until
from tests.test_sync import Informer, _point_at

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOLD = "example.com/hold"  # a finalizer on an object in a twin: its namespace stays Terminating


@pytest.fixture
def watched_demo(tmp_path: Path, settings: Any) -> Iterator[Sandbox]:
    """The demo fleet, kept in the snapshot by the watcher until the test ends."""
    with Sandbox(scenario="demo", controller_delay=0.0, port=0, bookmark_interval=1.0) as sb:
        _point_at(sb, tmp_path, settings)
        running = Informer()
        try:
            names = {o["metadata"]["name"] for o in sb.store.items(NAMESPACES)}
            wait_until(
                lambda: (
                    set(Namespace.objects.values_list("name", flat=True)) == names
                    and Cluster.objects.filter(role__contains="Consumer").count() == 2
                ),
                30,
                message="the watcher's first sync",
            )
            yield sb
        finally:
            running.close()


def _twins(page: Any) -> Any:
    return page.locator("#tenant tbody tr")


def test_a_consumers_page_lists_its_twins_here_and_follows_them(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    watched_demo: Sandbox,
) -> None:
    sb = watched_demo
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/clusters/bologna/")
    tenant = page.locator("#tenant")
    expect(tenant.locator("h3")).to_have_text("Offloaded by bologna to this cluster")
    # bologna only consumes: what it offloads here comes right after its modules, before the
    # provider's sections (which say it offers nothing).
    headings = page.locator("main h3").all_inner_texts()
    assert headings[:2] == ["Modules", "Offloaded by bologna to this cluster"], headings
    expect(tenant.locator("p").first).to_contain_text("bologna consumes this cluster's resources")
    expect(tenant.locator("p code")).to_have_text(["liqo.io/remote-cluster-id=bologna", "liqo-tenant-bologna"])
    # Both twins, by name (DefaultName: reports-bologna; EnforceSameName: etl), with their phase;
    # turin's twin and the tenant namespace itself are not rows.
    expect(_twins(page).locator("td:nth-child(1)")).to_have_text(["etl", "reports-bologna"])
    expect(_twins(page).locator("td:nth-child(2) .badge.ok")).to_have_text(["Active", "Active"])
    expect(_twins(page).first.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "cluster-tenant-bologna.png"), full_page=True)

    # bologna stops offloading reports: Liqo deletes the twin here. Something in it holds the deletion
    # for now (a finalizer), so the namespace is Terminating first.
    sb.server.create(
        CONFIG_MAPS,
        "reports-bologna",
        {"metadata": {"name": "held", "namespace": "reports-bologna", "finalizers": [HOLD]}},
        manager="kubectl",
    )
    assert tenants.withdraw_here(sb.server, sb.liqo, "bologna", "reports") == "reports-bologna"
    wait_until(
        lambda: Namespace.objects.filter(name="reports-bologna", status_phase="Terminating").exists(),
        20,
        message="Terminating in the snapshot",
    )
    page.reload()
    expect(_twins(page).filter(has_text="reports-bologna").locator("td:nth-child(2) .badge")).to_have_text(
        "Terminating"
    )

    held = copy.deepcopy(sb.store.get(CONFIG_MAPS, "reports-bologna", "held"))  # the store's own is not ours
    assert held is not None and held["metadata"]["deletionTimestamp"]
    held["metadata"]["finalizers"] = []  # what holds it lets go: the namespace controller finishes
    sb.server.update(CONFIG_MAPS, "reports-bologna", "held", held, manager="kubectl")
    wait_until(lambda: not Namespace.objects.filter(name="reports-bologna").exists(), 20, message="the twin gone")
    page.reload()
    expect(_twins(page).locator("td:nth-child(1)")).to_have_text(["etl"])

    # It offloads another namespace here: its twin appears, and a peer's twin count stays its own.
    assert tenants.offload_here(sb.server, sb.liqo, "bologna", "billing") == "billing-bologna"
    wait_until(lambda: Namespace.objects.filter(name="billing-bologna").exists(), 20, message="the new twin")
    page.reload()
    expect(_twins(page).locator("td:nth-child(1)")).to_have_text(["billing-bologna", "etl"])
    expect(_twins(page).locator("td:nth-child(2)")).to_have_text(["Active", "Active"])

    # turin both provides and consumes: its page has its own twin.
    page.goto(f"{live_server.url}/clusters/turin/")
    expect(_twins(page).locator("td:nth-child(1)")).to_have_text(["ci-runners-turin"])
    expect(page.locator("#tenant p code")).to_have_text(["liqo.io/remote-cluster-id=turin", "liqo-tenant-turin"])
    assert page.locator("main h3").all_inner_texts()[-1] == "Offloaded by turin to this cluster"  # last: a provider


def test_a_peer_that_only_provides_has_no_tenant_table(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    watched_demo: Sandbox,
) -> None:
    assert Cluster.objects.get(cluster_id="milan").role == "Provider"
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/clusters/milan/")
    tenant = page.locator("#tenant")
    expect(tenant.locator("h3")).to_have_text("Offloaded by milan to this cluster")
    expect(tenant).to_contain_text(
        "milan does not consume this cluster's resources (role Provider): nothing is offloaded here from it."
    )
    expect(tenant.locator("table")).to_have_count(0)
    # The rest of the page is there: its hosted namespaces (it is a provider).
    expect(page.locator("section", has=page.locator("h3", has_text="Namespaces hosted"))).to_contain_text(
        "web-frontend"
    )


def test_the_peer_list_points_at_what_a_consumer_offloads_here(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    watched_demo: Sandbox,
) -> None:
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/clusters/")
    links = page.get_by_role("link", name="what it offloads here")
    expect(links).to_have_count(2)  # bologna (Consumer) and turin (ConsumerAndProvider), not the providers
    expect(page.locator("tr", has_text="milan").get_by_role("link", name="what it offloads here")).to_have_count(0)
    page.locator("tr", has_text="bologna").get_by_role("link", name="what it offloads here").click()
    page.wait_for_url(f"{live_server.url}/clusters/bologna/#tenant")
    expect(page.locator("#tenant")).to_be_in_viewport()
    expect(_twins(page).locator("td:nth-child(1)")).to_have_text(["etl", "reports-bologna"])
