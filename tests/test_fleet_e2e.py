"""Issue 28 end to end, with every part real and in its own process (tests/fleet_e2e.py): a sandbox
domain served by ``python -m sandbox serve``, Redis, a Celery worker and beat, ``manage.py
watch_cluster`` replicas, and this process as the web, driven by Chromium or the API client.

- A change made in the browser under each cluster's ``/m/<name>/`` is written by the worker to that
  cluster's API server (kubectl of that context shows it, the other cluster's namespace of the same
  name has none) and audited under that cluster.
- Two watcher replicas; one SIGKILLed: the other holds its clusters within the lease and their rows
  keep following their API servers.
- One cluster's API server out (the sandbox's ``outage`` fault): the other's changes apply; the down
  one's wait and apply once it answers again, none lost.
"""

from __future__ import annotations

import re
import signal
import time
from typing import Any

import pytest
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from offloading.choices import AuditAction, ChangeState
from offloading.cluster import breaker as apihealth
from offloading.models import AuditEvent, ChangeRequest, Namespace
from tests.browser import login
from tests.fleet_e2e import LEASE_SECONDS, Fleet

NAMESPACE = "orders"  # made in every cluster: the same name, a different namespace in each
ANNOTATION = "liqo-dash.io/change-id"
OFFLOAD = {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "LocalAndRemote"}


def _prefix(fleet: Fleet, cluster: str) -> str:
    return f"/m/{fleet.managed[cluster].name}"


def _has_row(fleet: Fleet, cluster: str, name: str) -> bool:
    return Namespace.objects.filter(managed=fleet.managed[cluster], name=name).exists()


def _change_id(fleet: Fleet, cluster: str, namespace: str) -> str | None:
    written = fleet.offloading(cluster, namespace)
    return None if written is None else (written["metadata"].get("annotations") or {}).get(ANNOTATION)


def test_a_change_in_the_browser_in_each_cluster_is_written_to_that_clusters_api_and_audited_there(
    start_fleet: Any, live_server: Any, admin_user: Any, browser_page: Any
) -> None:
    fleet = start_fleet(["rome", "milan"])
    for cluster in fleet.clusters:
        fleet.create_namespace(cluster, NAMESPACE, {"team": cluster})
    fleet.until(lambda: all(_has_row(fleet, c, NAMESPACE) for c in fleet.clusters), 30, "both watchers' rows")
    page = browser_page
    login(page, live_server)
    changes: dict[str, int] = {}
    for cluster in ("milan", "rome"):  # milan first: rome's namespace must stay untouched meanwhile
        base = f"{live_server.url}{_prefix(fleet, cluster)}"
        page.goto(f"{base}/namespaces/{NAMESPACE}/offload/")
        page.locator("#preview").get_by_text(re.compile(r"of \d+ clusters? selected")).wait_for()
        page.click("#offload-form button[type=submit]")
        page.wait_for_url(f"{base}/changes/*/")
        changes[cluster] = int(page.url.rstrip("/").rsplit("/", 1)[1])
        page.locator("#change-status .badge", has_text="applied").wait_for(timeout=40_000)
        change = ChangeRequest.objects.get(pk=changes[cluster])
        assert change.managed_id == fleet.managed[cluster].pk and change.state == ChangeState.APPLIED
        assert _change_id(fleet, cluster, NAMESPACE) == str(change.pk), fleet.logs()
        if cluster == "milan":
            assert fleet.offloading("rome", NAMESPACE) is None, "milan's change reached rome"
    assert _change_id(fleet, "milan", NAMESPACE) == str(changes["milan"]), "rome's change rewrote milan's"

    for cluster, pk in changes.items():
        managed = fleet.managed[cluster]
        actions = AuditEvent.objects.filter(change_id=pk).values_list("managed_id", "action")
        assert sorted(actions) == sorted([(managed.pk, AuditAction.REQUESTED), (managed.pk, AuditAction.APPLIED)])
        # The cluster's audit page lists its change, never the other cluster's.
        other = changes["rome" if cluster == "milan" else "milan"]
        page.goto(f"{live_server.url}{_prefix(fleet, cluster)}/audit/?namespace={NAMESPACE}")
        table = page.locator("main table tbody")
        expect(table.get_by_role("link", name=f"change #{pk}", exact=True).first).to_be_visible()
        expect(table.get_by_role("link", name=f"change #{other}", exact=True)).to_have_count(0)
        # And the snapshot follows: the namespace's row in that cluster is offloaded, Ready.
        fleet.until(
            lambda: Namespace.objects.filter(
                managed=fleet.managed[cluster], name=NAMESPACE, offloaded=True, offloading_phase="Ready"
            ).exists(),
            30,
            f"{cluster}'s row to show the offloading Ready",
        )
