"""Four-eyes approval in the browser (issue 29), from request to approval to apply: with the approval
policy ``destructive``, operator alice unoffloads a namespace of the demo fleet, the change waits for a
second person, alice may not approve it herself, operator bob approves it on the Approvals page, the real
worker deletes the NamespaceOffloading in the sandbox, and the audit page shows the four steps.

It is also the generator of the screenshots in docs/screenshots/governance-*.png: with
``LIQO_DASH_SCREENSHOTS`` set, each step saves one (1280 x 800, full page)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from access import roles
from access.models import Scope
from offloading.choices import ChangeState
from offloading.cluster import kube
from offloading.models import ChangeRequest, Namespace, Pod
from offloading.snapshot import informer
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers pods
from tests.browser import TRACK_INPUT
from tests.fixtures.cluster import Sandboxes, point_at
from tests.fixtures.waits import ROOT, wait_until
from tests.test_e2e import _get_offloading

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

NAMESPACE = "web-frontend"  # offloaded and Ready on milan in the demo fleet, four pods running there
SHOTS = ROOT / "docs" / "screenshots"


@pytest.fixture
def sandbox(sandboxes: Sandboxes, settings: Any) -> Iterator[Any]:
    """The demo fleet (the shared sandbox runs the minimal one): namespaces offloaded, pods on peers."""
    sb = sandboxes.get("demo")
    point_at(sb.kubeconfig_path, settings)  # type: ignore[attr-defined]  # what the k8s and pipeline fixtures read
    yield sb
    kube.reset_client()


def _operator(django_user_model: Any, name: str) -> None:
    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    user.groups.add(Group.objects.get_or_create(name=roles.OPERATOR)[0])
    Scope.objects.create(user=user, kind="glob", value="web-*")


def _signed_in(browser: Any, live_server: Any, name: str) -> Any:
    """A page of its own browser context (its own cookies) with ``name`` signed in."""
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.add_init_script(TRACK_INPUT)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", f"{name}-password-123")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


def _shot(page: Any, what: str) -> None:
    if os.environ.get("LIQO_DASH_SCREENSHOTS"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"governance-{what}.png"), full_page=True)


def test_an_unoffload_is_asked_approved_and_applied_in_the_browser(
    browser_page: Any, live_server: Any, pipeline: Any, k8s: Any, django_user_model: Any, settings: Any
) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "APPROVAL_POLICY": "destructive"}
    pipeline.env["LIQO_DASH_APPROVAL_POLICY"] = "destructive"
    _operator(django_user_model, "alice")
    _operator(django_user_model, "bob")
    pipeline.start_worker()
    pipeline.start_beat()
    wait_until(
        lambda: Namespace.objects.filter(name=NAMESPACE, offloaded=True).exists(),
        60,
        message=f"the first refresh to see {NAMESPACE} offloaded",
    )

    # Pods are kept by the watcher, which this pipeline does not run: do here what it does with the pods it
    # lists, so that the confirmation page shows the pod the unoffload stops on milan.
    def pods_synced() -> bool:
        items = [obj for page_items, _ in kube.list_pages("pods") for obj in page_items]
        informer.SYNCED["pods"].apply([("ADDED", obj) for obj in items], timezone.now())
        return Pod.objects.filter(namespace=NAMESPACE, phase="Running", cluster_id="milan").exists()

    wait_until(pods_synced, 60, interval=1, message=f"the snapshot to see a pod of {NAMESPACE} on milan")
    assert _get_offloading(k8s, NAMESPACE) is not None
    browser = browser_page.context.browser
    alice = _signed_in(browser, live_server, "alice")
    bob = _signed_in(browser, live_server, "bob")

    # 1. Alice unoffloads the namespace from its page, typing its name to confirm the destructive change.
    alice.goto(f"{live_server.url}/namespaces/{NAMESPACE}/")
    alice.get_by_role("button", name="Unoffload…").click()
    alice.wait_for_url(f"{live_server.url}/namespaces/{NAMESPACE}/unoffload/")
    expect(alice.locator("#destructive-reason")).to_be_visible()
    expect(alice.locator("main")).to_contain_text("milan")
    expect(alice.locator("main")).not_to_contain_text("No running pod is hit")
    alice.fill("input[name=confirm]", NAMESPACE)
    submit = alice.get_by_role("button", name=f"Unoffload {NAMESPACE}")
    expect(submit).to_be_enabled()
    _shot(alice, "1-unoffload-confirm")
    submit.click()
    alice.wait_for_url(f"{live_server.url}/changes/*/")
    change = ChangeRequest.objects.get(namespace=NAMESPACE)
    change_url = f"{live_server.url}/changes/{change.pk}/"

    # 2. The change page says it awaits approval; the worker leaves it alone.
    expect(alice.locator("#change-status")).to_contain_text("Awaiting approval")
    panel = alice.locator("#governance")
    expect(panel).to_contain_text("Awaiting a decision")
    expect(panel).to_contain_text("A destructive change needs a second person")
    expect(panel.locator("#own-approval")).to_contain_text("you cannot approve it")
    assert ChangeRequest.objects.get(pk=change.pk).state == ChangeState.AWAITING_APPROVAL
    _shot(alice, "2-awaiting-approval")

    # 3. Alice may not approve her own change: the Approvals page offers her nothing to decide, and the
    # server refuses a hand-made approval with the reason.
    alice.goto(f"{live_server.url}/approvals/")
    expect(alice.locator("#awaiting-me")).to_contain_text("Nothing awaits your decision")
    expect(alice.locator("#my-waiting")).to_contain_text(NAMESPACE)
    alice.evaluate(
        """(action) => {
          const form = document.createElement("form");
          form.method = "post";
          form.action = action;
          const token = document.querySelector("input[name=csrfmiddlewaretoken]").cloneNode();
          const comment = Object.assign(document.createElement("input"), {name: "comment", value: "mine"});
          form.append(token, comment);
          document.body.append(form);
          form.submit();
        }""",
        f"/changes/{change.pk}/approve/",
    )
    refusal = alice.locator("main [role=alert]")
    expect(refusal).to_contain_text("You asked for this change: another person")
    _shot(alice, "3-own-approval-refused")
    assert ChangeRequest.objects.get(pk=change.pk).state == ChangeState.AWAITING_APPROVAL
    assert _get_offloading(k8s, NAMESPACE) is not None

    # 4. Bob sees it on his Approvals page, with its reason and impact, and approves it with a comment.
    bob.goto(f"{live_server.url}/approvals/")
    card = bob.locator(f"#awaiting-me article.approval:has(a[href='/changes/{change.pk}/'])")
    expect(card).to_contain_text(f"unoffload {NAMESPACE}")
    expect(card).to_contain_text("asked by alice")
    expect(card).to_contain_text("deletes its twin namespace on milan")  # the reason, with what it destroys
    card.locator("input[name=comment]").fill("Moving web-frontend back home for the milan maintenance")
    _shot(bob, "4-approvals-bob")
    card.get_by_role("button", name="Approve").click()
    expect(bob.locator("main")).to_contain_text(f"Approved change #{change.pk}.")
    expect(bob.locator("#awaiting-me")).to_contain_text("Nothing awaits your decision")

    # 5. The worker applies it: the change page follows by itself, and the offloading is gone.
    bob.goto(change_url)
    expect(bob.locator("#change-status .badge", has_text="applied")).to_be_visible(timeout=90_000)
    expect(bob.locator("#governance")).to_contain_text("Approved by bob")
    wait_until(lambda: _get_offloading(k8s, NAMESPACE) is None, 60, message="the NamespaceOffloading deleted")
    assert ChangeRequest.objects.get(pk=change.pk).state == ChangeState.APPLIED
    _shot(bob, "5-applied")

    # 6. The audit trail of the change: requested and approval requested by alice, approved by bob, applied.
    bob.goto(f"{live_server.url}/audit/?change={change.pk}")
    rows = bob.locator("main table tbody tr")
    expect(rows).to_have_count(4)
    newest_first = [("Change applied", "alice"), ("Change approved", "bob"), ("Approval requested", "alice")]
    for row, (action, who) in zip(rows.all(), [*newest_first, ("Change requested", "alice")], strict=True):
        expect(row.locator("td").nth(2)).to_contain_text(who)
        expect(row.locator("td").nth(3)).to_contain_text(action)
    expect(rows.nth(1)).to_contain_text("Moving web-frontend back home")  # bob's comment
    _shot(bob, "6-audit")
