"""Open pages follow the cluster without a reload (Chromium on the live server, the sandbox and
kubectl): the namespace list shows a change made with kubectl within two seconds of the snapshot
seeing it, answering "nothing changed" (304) in between; the freshness badge ages on its own."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from offloading.changes.snapshot import refresh
from offloading.models import SnapshotState

from .test_browser import browser_page, login  # noqa: F401 - the browser fixture
from .test_pages import fleet  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KUBECTL = "kubectl"


def _kubectl(sandbox: Any, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [KUBECTL, f"--kubeconfig={sandbox.kubeconfig_path}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


OFFLOADING = """
apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceOffloading
metadata: {name: offloading, namespace: live-demo}
spec: {namespaceMappingStrategy: DefaultName, podOffloadingStrategy: LocalAndRemote}
"""


def test_the_list_follows_a_kubectl_change_and_polls_cheaply(
    browser_page: Any,  # noqa: F811
    live_server: Any,
    admin_user: Any,
    sandbox: Any,
) -> None:
    _kubectl(sandbox, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: live-demo}\n")
    refresh()
    page = browser_page
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status) if "/namespaces/" in r.url else None)
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/?q=live-demo")
    row = page.locator("#namespace-table tr", has_text="live-demo")
    row.get_by_text("not offloaded").wait_for()
    # Nothing changes for a while: the polls answer 304 and the rows stay.
    deadline = time.monotonic() + 10
    while 304 not in statuses and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert 304 in statuses, statuses

    _kubectl(sandbox, "apply", "-f", "-", stdin=OFFLOADING)
    refresh()  # what the watcher does when it sees the change
    seen = time.monotonic()
    row.get_by_text("not offloaded").wait_for(state="detached", timeout=2500)
    assert time.monotonic() - seen <= 2.5
    # The filter the user typed is kept by the poll.
    assert page.url.endswith("/namespaces/?q=live-demo")
    assert page.locator("#namespace-table tbody tr").count() == 1


def test_the_freshness_badge_ages_amber_then_red_without_a_reload(
    browser_page: Any,  # noqa: F811
    live_server: Any,
    admin_user: Any,
    fleet: Any,  # noqa: F811
    settings: Any,
) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "REFRESH_INTERVAL": 1.0, "STALE_AFTER": 60.0}
    SnapshotState.objects.filter(pk=1).update(last_success_at=timezone.now(), last_attempt_at=timezone.now())
    page = browser_page
    login(page, live_server)
    badge = page.locator(".freshness[data-fresh-at]")
    assert badge.get_attribute("data-level") == "fresh"
    expect(badge).to_have_attribute("data-level", "amber", timeout=5000)
    expect(badge).to_have_attribute("data-level", "red", timeout=8000)
    assert "stale" in badge.inner_text()
    # A refresh arrives: the next poll of the badge brings it back to fresh.
    SnapshotState.objects.filter(pk=1).update(last_success_at=timezone.now() + timedelta(seconds=30))
    expect(page.locator(".freshness[data-fresh-at]")).to_have_attribute("data-level", "fresh", timeout=15000)
    title = page.locator(".freshness[data-fresh-at]").get_attribute("title") or ""
    assert "Last successful refresh" in title
