"""In Chromium against the live server: the same namespace edited in two tabs. Tab A applies first; tab
B's Apply is refused as stale and comes back with the three-way view, both changes merged, and applies
on the next click; a field both tabs changed needs a choice. The unoffload button waits for the name.

No worker runs here: "applied" is what the worker and the watcher would leave in the snapshot (the
desired spec, the next generation), written when the change is enqueued."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from offloading.changes import requests as change_requests
from offloading.choices import ChangeState
from offloading.models import ChangeRequest, Namespace
from tests.browser import TRACK_INPUT, htmx_idle, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots"
BOTH_REGIONS = "topology.kubernetes.io/region in (eu-south,eu-west)"


def _applied_when_enqueued(change_id: int, countdown: int = 0) -> None:
    change = ChangeRequest.objects.get(pk=change_id)
    namespace = Namespace.objects.get(name=change.namespace)
    Namespace.objects.filter(pk=namespace.pk).update(
        offloading_spec=change.desired_spec, offloading_generation=namespace.offloading_generation + 1
    )
    ChangeRequest.objects.filter(pk=change_id).update(state=ChangeState.APPLIED)


@pytest.fixture
def context(chromium: Any) -> Any:
    """One browser context (one session, like two tabs of one window)."""
    ctx = chromium.new_context(viewport={"width": 1440, "height": 900})
    ctx.add_init_script(TRACK_INPUT)
    return ctx


def _two_tabs(context: Any, live_server: Any) -> tuple[Any, Any]:
    page = context.new_page()
    login(page, live_server)
    other = context.new_page()
    for tab in (page, other):
        tab.goto(f"{live_server.url}/namespaces/shop/offload/")
        tab.locator("#preview").get_by_text("clusters selected").wait_for()
        htmx_idle(tab)
    return page, other


def _apply(tab: Any, live_server: Any) -> None:
    htmx_idle(tab)
    tab.click("#offload-form button[type=submit]")
    tab.wait_for_load_state()


def _confirm_destructive(tab: Any) -> None:
    """LocalAndRemote to Remote is destructive: the preview says why and asks for the box in the form."""
    box = tab.locator("#destructive-box")
    expect(box).to_contain_text("from LocalAndRemote to Remote")
    box.locator("#id_confirm").check()
    htmx_idle(tab)
    expect(tab.locator("#id_confirm")).to_be_checked()  # the preview that follows keeps it


def test_two_tabs_merge_in_place(
    context: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(change_requests, "enqueue_apply", _applied_when_enqueued)
    tab_a, tab_b = _two_tabs(context, live_server)

    tab_a.select_option("#id_pod_offloading_strategy", "Remote")
    _confirm_destructive(tab_a)
    _apply(tab_a, live_server)
    tab_a.wait_for_url(f"{live_server.url}/changes/*/")
    assert Namespace.objects.get(name="shop").offloading_generation == 4

    tab_b.fill("#id_cluster_selector", BOTH_REGIONS)
    _apply(tab_b, live_server)
    view = tab_b.locator("#merge-view")
    expect(view).to_be_visible()
    expect(tab_b.locator("#stale-banner")).to_contain_text("changed after you loaded it (generation 3 is now 4)")
    expect(view.locator("[data-merge-field=podOffloadingStrategy]")).to_contain_text("only they changed it")
    expect(view.locator("[data-merge-field=clusterSelector]")).to_contain_text("only you changed it")
    # The fields hold both changes, and the preview shows them.
    expect(tab_b.locator("#id_pod_offloading_strategy")).to_have_value("Remote")
    expect(tab_b.locator("#id_cluster_selector")).to_have_value(BOTH_REGIONS)
    htmx_idle(tab_b)
    expect(tab_b.locator("#preview-field-changes")).to_contain_text(BOTH_REGIONS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab_b.screenshot(path=str(SCREENSHOTS / "conflict-merged-1440.png"), full_page=True)
    tab_b.set_viewport_size({"width": 420, "height": 900})
    tab_b.screenshot(path=str(SCREENSHOTS / "conflict-merged-420.png"), full_page=True)
    view.screenshot(path=str(SCREENSHOTS / "conflict-merged-420-view.png"))
    tab_b.set_viewport_size({"width": 1440, "height": 900})

    _apply(tab_b, live_server)
    tab_b.wait_for_url(f"{live_server.url}/changes/*/")
    second = ChangeRequest.objects.order_by("pk").last()
    assert second is not None and ChangeRequest.objects.count() == 2
    assert (second.desired_spec or {})["podOffloadingStrategy"] == "Remote"  # A's change, kept
    terms = (second.desired_spec or {})["clusterSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["eu-south", "eu-west"]  # B's change
    assert second.base_generation == 4


def test_a_preview_that_answers_late_keeps_the_tick(
    context: Any, live_server: Any, admin_user: Any, fleet: Any
) -> None:
    """A preview sent before the box was ticked (leaving the selector field fires one) answers with the box
    unticked: the user's tick stays (hx-preserve), or the submit would fail for a box they did tick."""
    page = context.new_page()
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/shop/offload/")
    page.locator("#preview").get_by_text("clusters selected").wait_for()
    page.select_option("#id_pod_offloading_strategy", "Remote")
    _confirm_destructive(page)
    # The late answer: the same preview of Remote, asked without the box (as when it left before the tick).
    page.evaluate(
        """url => htmx.ajax('POST', url, {target: '#preview', values: {
            cluster_selector: document.querySelector('#id_cluster_selector').value,
            pod_offloading_strategy: 'Remote',
            namespace_mapping_strategy: document.querySelector('#id_namespace_mapping_strategy').value,
            csrfmiddlewaretoken: document.querySelector('[name=csrfmiddlewaretoken]').value}})""",
        f"{live_server.url}/namespaces/shop/offload/preview/",
    )
    htmx_idle(page)
    expect(page.locator("#destructive-box")).to_contain_text("from LocalAndRemote to Remote")
    expect(page.locator("#id_confirm")).to_be_checked()


def test_a_field_both_tabs_changed_needs_a_choice(
    context: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(change_requests, "enqueue_apply", _applied_when_enqueued)
    tab_a, tab_b = _two_tabs(context, live_server)
    tab_a.select_option("#id_pod_offloading_strategy", "Remote")
    _confirm_destructive(tab_a)
    _apply(tab_a, live_server)
    tab_a.wait_for_url(f"{live_server.url}/changes/*/")

    tab_b.select_option("#id_pod_offloading_strategy", "Local")
    tab_b.fill("#id_cluster_selector", BOTH_REGIONS)
    _apply(tab_b, live_server)
    row = tab_b.locator("#merge-view [data-merge-field=podOffloadingStrategy]")
    expect(row).to_contain_text("you both changed it: choose")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab_b.screenshot(path=str(SCREENSHOTS / "conflict-choice-1440.png"), full_page=True)
    tab_b.set_viewport_size({"width": 420, "height": 900})
    tab_b.screenshot(path=str(SCREENSHOTS / "conflict-choice-420.png"), full_page=True)
    tab_b.locator("#stale-banner").screenshot(path=str(SCREENSHOTS / "conflict-choice-420-banner.png"))
    tab_b.locator("#merge-view").screenshot(path=str(SCREENSHOTS / "conflict-choice-420-view.png"))
    tab_b.locator("#preview").screenshot(path=str(SCREENSHOTS / "conflict-choice-420-preview.png"))
    overflow = tab_b.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, "the conflict view must not scroll sideways at 420 px"
    tab_b.set_viewport_size({"width": 1440, "height": 900})

    # Apply without a choice: the browser refuses (the radio is required) and nothing is recorded.
    url = tab_b.url
    tab_b.click("#offload-form button[type=submit]")
    assert tab_b.url == url and ChangeRequest.objects.count() == 1
    assert tab_b.evaluate("document.getElementById('offload-form').checkValidity()") is False

    # Theirs: the field takes their value, the preview follows, and the Apply keeps it.
    row.locator("input[value=theirs]").check()
    expect(tab_b.locator("#id_pod_offloading_strategy")).to_have_value("Remote")
    row.locator("input[value=mine]").check()
    expect(tab_b.locator("#id_pod_offloading_strategy")).to_have_value("Local")
    row.locator("input[value=theirs]").check()
    _apply(tab_b, live_server)
    tab_b.wait_for_url(f"{live_server.url}/changes/*/")
    second = ChangeRequest.objects.order_by("pk").last()
    assert second is not None and ChangeRequest.objects.count() == 2
    assert (second.desired_spec or {})["podOffloadingStrategy"] == "Remote"
    assert (second.desired_spec or {})["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "eu-south",
        "eu-west",
    ]


def test_the_unoffload_button_waits_for_the_name(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(change_requests, "enqueue_apply", lambda change_id, countdown=0: None)
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/shop/unoffload/")
    button = page.locator("main form button[type=submit]")
    expect(button).to_be_disabled()
    page.fill("#id_confirm", "sho")
    expect(button).to_be_disabled()
    page.fill("#id_confirm", "shop")
    expect(button).to_be_enabled()
    page.fill("#id_confirm", "shopx")
    expect(button).to_be_disabled()
    page.fill("#id_confirm", " shop ")
    expect(button).to_be_enabled()
    button.click()
    page.wait_for_url(f"{live_server.url}/changes/*/")
    assert ChangeRequest.objects.get().action == "unoffload"
