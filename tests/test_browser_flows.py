"""In Chromium against the live server: bulk unoffload asks for the typed count before it queues
anything; a conflict shows the three-way view and applies only what the user chose; a Warning event
Liqo raised about a selector applied with kubectl shows on the namespace page, first."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from offloading.changes import requests as change_requests
from offloading.choices import ChangeAction, ChangeState
from offloading.models import ChangeRequest, Namespace
from offloading.snapshot import informer
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers events
from offloading.snapshot.refresh import refresh
from tests.browser import htmx_idle, login
from tests.fixtures.snapshot import READY_SPEC
from tests.fixtures.waits import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BOTH_REGIONS = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south", "eu-west"]}
            ]
        }
    ]
}


def test_bulk_unoffload_needs_the_typed_count(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(change_requests, "enqueue_apply", lambda change_id, countdown=0: None)
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/bulk/")
    page.check("input[name=action][value=unoffload]")
    page.fill("input[name=namespace_selector]", "env=prod")
    box = page.locator("#id_confirm_count")
    box.wait_for()
    expect(page.locator("#bulk-impact")).to_contain_text("Type 1 to confirm")
    page.click("#bulk-form button[type=submit]")  # the browser itself refuses the empty required box
    # Leaving the selector box fired a change event and one more preview, which replaces the box.
    htmx_idle(page)
    assert not ChangeRequest.objects.exists()
    box.fill("2")
    page.click("#bulk-form button[type=submit]")
    expect(page.locator("main")).to_contain_text("You typed 2, but 1 namespaces will change")
    assert not ChangeRequest.objects.exists()
    page.locator("#id_confirm_count").fill("1")
    page.click("#bulk-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/bulk/*/")
    assert ChangeRequest.objects.get().action == ChangeAction.UNOFFLOAD


def test_a_conflict_is_resolved_field_by_field(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(change_requests, "enqueue_apply", lambda change_id, countdown=0: None)
    base = {**READY_SPEC, "podOffloadingStrategy": "LocalAndRemote"}
    theirs = {**base, "podOffloadingStrategy": "Remote", "namespaceMappingStrategy": "EnforceSameName"}
    Namespace.objects.filter(name="shop").update(offloading_spec=theirs, offloading_generation=5)
    conflicted = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        base_spec=base,
        # Mine also widens the selector: keeping theirs for the one field both changed still changes
        # something (a re-apply that changes nothing is refused: "nothing to change").
        desired_spec={**base, "podOffloadingStrategy": "Local", "clusterSelector": BOTH_REGIONS},
        state=ChangeState.CONFLICT,
        requester_name="admin",
        source="web",
    )
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/changes/{conflicted.pk}/")
    table = page.locator("table.merge")
    expect(table.locator("tr.conflict")).to_contain_text("podOffloadingStrategy")
    page.check("input[name=choice_podOffloadingStrategy][value=theirs]")
    page.click("#merge-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/changes/*/")
    again = ChangeRequest.objects.exclude(pk=conflicted.pk).get()
    assert again.desired_spec["podOffloadingStrategy"] == "Remote"  # my choice: theirs
    assert again.desired_spec["clusterSelector"] == BOTH_REGIONS  # only I changed it: mine
    assert again.base_generation == 5


def test_liqos_warning_event_shows_on_the_namespace_page(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    sandbox: Any,
) -> None:
    manifest = """
apiVersion: v1
kind: Namespace
metadata: {name: broken}
---
apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceOffloading
metadata: {name: offloading, namespace: broken}
spec:
  clusterSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: size, operator: Gt, values: [big]}]
"""
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={sandbox.kubeconfig_path}", "apply", "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    refresh()
    from offloading.cluster import kube
    from offloading.models.inventory import KubeEvent

    def synced() -> bool:  # what the watcher does with the events it sees
        items = [obj for page_items, _ in kube.list_pages("events") for obj in page_items]
        informer.SYNCED["events"].apply([("ADDED", obj) for obj in items], timezone.now())
        return KubeEvent.objects.filter(namespace="broken", type="Warning").exists()

    wait_until(synced, 60, message="Liqo's Warning event")  # the sandbox's controller raises it
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/?q=broken")
    expect(page.locator("#namespace-table")).to_contain_text("1 warning")
    page.goto(f"{live_server.url}/namespaces/broken/")
    first = page.locator("#events tbody tr").first
    expect(first).to_contain_text("Warning")
    expect(first).to_contain_text("Invalid")
