"""Changes across the fleet in the real browser (offloading/views/fleetwide.py): three managed clusters with
200 changes in all, in every state; the cluster filter narrows the table to one cluster and its links lead
to the change's page in that cluster; axe finds nothing serious; screenshots at 1440 and 420 px
(``screenshots/issue28-fleet-changes-*.png``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from offloading.choices import ChangeAction, ChangeState, Source
from offloading.models import ChangeRequest, ManagedCluster, SnapshotState
from tests.browser import SCREENSHOTS, htmx_idle, login
from tests.test_layout import _axe

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STATES = [ChangeState.APPLIED, ChangeState.FAILED, ChangeState.QUEUED, ChangeState.AWAITING_APPROVAL]


def _changes() -> None:
    SnapshotState.touch(None, local_cluster_id="rome")
    for name in ("milan", "turin"):
        ManagedCluster.objects.create(name=name, context=name)
    clusters = list(ManagedCluster.objects.order_by("pk"))
    now = timezone.now()  # every snapshot fresh: no outage banner over the page
    for cluster in clusters:
        SnapshotState.touch(cluster, last_success_at=now, last_attempt_at=now)
    ChangeRequest.objects.bulk_create(
        ChangeRequest(
            managed=clusters[i % 3],
            namespace=f"team-{i % 40:02d}-payments",
            action=ChangeAction.OFFLOAD if i % 3 else ChangeAction.UPDATE,
            state=STATES[i % 4],
            requester_name=("alice", "bob", "carol")[i % 3],
            source=Source.WEB,
            message="" if i % 4 == 0 else "the API server answered 409 Conflict: the object was modified",
        )
        for i in range(200)
    )


def test_the_fleets_changes_filter_by_cluster_and_link_into_it(
    browser_page: Any, live_server: Any, admin_user: Any
) -> None:
    _changes()
    page = browser_page
    login(page, live_server)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1440, 420):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/fleet/changes/")
        htmx_idle(page)
        assert page.locator("table[aria-label=Changes] tbody tr").count() == 50  # a page of 200
        page.screenshot(path=str(SCREENSHOTS / f"issue28-fleet-changes-{width}.png"), full_page=False)
    assert _axe(page) == []
    page.set_viewport_size({"width": 1440, "height": 900})
    page.select_option("#id_cluster", "turin")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**cluster=turin**")
    clusters = page.locator("table[aria-label=Changes] tbody tr td:first-child").all_inner_texts()
    assert clusters and set(clusters) == {"turin"}
    page.locator("table[aria-label=Changes] tbody tr td:nth-child(2) a").first.click()
    page.wait_for_url("**/m/turin/changes/**")
    assert "turin" in page.locator("#cluster-switcher summary").inner_text()
