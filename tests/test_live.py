"""Open pages follow the cluster without a reload (Chromium on the live server, the sandbox and
kubectl): the namespace list polls every two seconds and shows a change made with kubectl once the
snapshot has it, answering "nothing changed" (304) in between; the freshness badge ages on its own.
How fast that is belongs to bench/: nothing here asserts a duration."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from offloading.models import SnapshotState
from offloading.snapshot.refresh import refresh
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KUBECTL = "kubectl"
FRESH_FOR = 10  # s: how long the freshness test's snapshot stays fresh before it starts to age


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
    browser_page: Any,
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
    # The region polls every two seconds (what bounds how late a change shows), with the page's own URL.
    assert page.locator("#namespace-table").get_attribute("hx-trigger") == "every 2s"
    # Nothing changes for a while: the polls answer 304 and the rows stay.
    deadline = time.monotonic() + 60  # the second poll is the first with an ETag; a slow machine takes long
    while 304 not in statuses and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert 304 in statuses, statuses

    _kubectl(sandbox, "apply", "-f", "-", stdin=OFFLOADING)
    page.evaluate("window.__notReloaded = true")
    refresh()  # what the watcher does when it sees the change
    row.get_by_text("not offloaded").wait_for(state="detached", timeout=30_000)
    assert page.evaluate("window.__notReloaded === true"), "a poll shows the change, not a reload"
    # The filter the user typed is kept by the poll.
    assert page.url.endswith("/namespaces/?q=live-demo")
    assert page.locator("#namespace-table tbody tr").count() == 1


def test_the_freshness_badge_ages_amber_then_red_without_a_reload(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    settings: Any,
) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "REFRESH_INTERVAL": 1.0, "STALE_AFTER": 60.0}
    page = browser_page
    login(page, live_server)  # how long logging in takes must not age the snapshot
    # The last refresh a little in the future, so that the page renders fresh however slow the machine:
    # its age counts from 0 once FRESH_FOR seconds have passed, amber 2 s later, red 5 s later.
    soon = timezone.now() + timedelta(seconds=FRESH_FOR)
    SnapshotState.touch(None, last_success_at=soon, last_attempt_at=soon)
    page.goto(f"{live_server.url}/namespaces/")
    badge = page.locator(".freshness[data-fresh-at]")
    assert badge.get_attribute("data-level") == "fresh"
    page.evaluate("window.__notReloaded = true")
    expect(badge).to_have_attribute("data-level", "amber", timeout=(FRESH_FOR + 30) * 1000)
    expect(badge).to_have_attribute("data-level", "red", timeout=30_000)
    assert page.evaluate("window.__notReloaded === true")
    assert "stale" in badge.inner_text()
    # A refresh arrives: the next poll of the badge brings it back to fresh.
    SnapshotState.touch(None, last_success_at=timezone.now() + timedelta(seconds=30))
    expect(page.locator(".freshness[data-fresh-at]")).to_have_attribute("data-level", "fresh", timeout=40_000)
    title = page.locator(".freshness[data-fresh-at]").get_attribute("title") or ""
    assert "Last successful refresh" in title
