"""A real browser (Debian's Chromium driven by Playwright) on the live server: log in, watch the
preview follow the selector as it is typed, submit, and keep screenshots of the pages."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.changes import requests as change_requests
from offloading.models import ChangeRequest, Namespace
from tests.browser import SCREENSHOTS, htmx_idle, login
from tests.fixtures.waits import wait_until
from tests.test_e2e import _free_namespace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_live_preview_follows_the_selector_and_submit_records_a_change(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No worker here: record what would be sent (the live server runs in this process).
    enqueued: list[int] = []
    monkeypatch.setattr(change_requests, "enqueue_apply", lambda change_id, countdown=0: enqueued.append(change_id))
    page = browser_page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/payments/offload/")
    preview = page.locator("#preview")
    preview.get_by_text("2 of 2 clusters selected").wait_for()

    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west)")
    preview.get_by_text("1 of 2 clusters selected").wait_for()
    assert "eu-south" in preview.inner_text()

    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west")
    preview.get_by_text("Fix before submitting").wait_for()

    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west)")
    page.select_option("select[name=pod_offloading_strategy]", "Remote")
    preview.get_by_text("1 of 2 clusters selected").wait_for()
    # The select's change and the textarea's delayed input each send a preview: keep the last one.
    htmx_idle(page)
    page.screenshot(path=str(SCREENSHOTS / "offload-form.png"), full_page=True)

    assert not ChangeRequest.objects.exists()
    page.click("#offload-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/changes/*/")
    change = ChangeRequest.objects.get()
    assert page.url == f"{live_server.url}/changes/{change.pk}/"
    assert (change.namespace, change.action, change.requester_name) == ("payments", "offload", "admin")
    assert change.desired_spec["podOffloadingStrategy"] == "Remote"
    terms = change.desired_spec["clusterSelector"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west"]}]}
    ]
    assert enqueued == [change.pk]

    page.goto(f"{live_server.url}/clusters/")
    page.screenshot(path=str(SCREENSHOTS / "clusters.png"), full_page=True)


@pytest.mark.e2e
def test_offload_in_the_browser_until_ready_with_the_real_pipeline(
    browser_page: Any, live_server: Any, admin_user: Any, pipeline: Any
) -> None:
    page = browser_page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pipeline.start_worker()
    pipeline.start_beat()
    wait_until(lambda: Namespace.objects.exists(), 60, message="the first refresh")
    namespace = _free_namespace()
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/{namespace.name}/offload/")
    page.locator("#preview").get_by_text("clusters selected").wait_for()
    page.click("#offload-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/changes/*/")
    # The change page polls by itself: no reload from here on.
    page.locator("#change-status .badge", has_text="applied").wait_for(timeout=60_000)
    page.locator("#change-status").get_by_text("Ready").first.wait_for(timeout=60_000)
    page.screenshot(path=str(SCREENSHOTS / "change-applied.png"), full_page=True)
    change = ChangeRequest.objects.get(namespace=namespace.name)
    assert change.state == "applied"

    page.goto(f"{live_server.url}/namespaces/")
    row = page.locator("tr", has=page.locator(f"a:text-is('{namespace.name}')"))
    assert "Ready" in row.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "namespaces.png"), full_page=True)


def test_htmx_idle_waits_for_a_preview_whose_delay_still_runs(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
) -> None:
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/bulk/")
    page.check("input[name=action][value=unoffload]")
    htmx_idle(page)
    assert "Type 1 to confirm" not in page.locator("#preview").inner_text()
    page.fill("input[name=namespace_selector]", "env=prod")
    # Right after typing, htmx has not even sent the preview (it waits 300 ms for more typing): idle must
    # wait for that request and its answer, and then (no retrying read) the preview is the typed one's.
    htmx_idle(page)
    assert "Type 1 to confirm" in page.locator("#preview").inner_text()
