"""Issue 28 end to end, with every part real and in its own process (tests/fixtures/domain.py): a sandbox
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

from playwright.sync_api import expect
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from offloading.choices import AuditAction, ChangeState
from offloading.cluster import breaker as apihealth
from offloading.models import AuditEvent, ChangeRequest, Namespace
from tests.browser import login
from tests.fixtures.domain import LEASE_SECONDS, Fleet

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
            lambda managed=managed: Namespace.objects.filter(
                managed=managed, name=NAMESPACE, offloaded=True, offloading_phase="Ready"
            ).exists(),
            30,
            f"{cluster}'s row to show the offloading Ready",
        )


def test_a_killed_watcher_replicas_clusters_are_taken_over_within_the_lease_and_their_rows_keep_updating(
    start_fleet: Any,
) -> None:
    fleet = start_fleet(["rome", "milan", "naples"], watchers=2)

    def split() -> bool:
        held = [fleet.held_by(name) for name in fleet.watchers]
        return sorted(map(len, held)) == [1, 2] and set().union(*held) == set(fleet.clusters)

    fleet.until(split, 30, "the two replicas to split the three clusters 2/1")
    victim = max(fleet.watchers, key=lambda name: len(fleet.held_by(name)))
    survivor = next(name for name in fleet.watchers if name != victim)
    lost = fleet.held_by(victim)
    for cluster in lost:  # the victim writes its clusters' rows while it lives
        fleet.create_namespace(cluster, "before-kill")
    fleet.until(lambda: all(_has_row(fleet, c, "before-kill") for c in lost), 30, "the victim's rows")

    fleet.kill_watcher(victim, signal.SIGKILL)
    killed = time.monotonic()
    for cluster in lost:  # made while nobody watches them
        fleet.create_namespace(cluster, "after-kill", {"made": "while-unwatched"})
        fleet.label_namespace(cluster, "before-kill", {"relabelled": "after-kill"})
    fleet.until(lambda: fleet.held_by(survivor) == set(fleet.clusters), 20, "the survivor to hold every cluster")
    took = time.monotonic() - killed
    assert took <= LEASE_SECONDS + 3, f"takeover after {took:.1f} s (lease {LEASE_SECONDS} s)"

    def caught_up() -> bool:
        return all(
            _has_row(fleet, cluster, "after-kill")
            and Namespace.objects.get(managed=fleet.managed[cluster], name="before-kill").labels.get("relabelled")
            == "after-kill"
            for cluster in lost
        )

    fleet.until(caught_up, 20, "the survivor to write what changed in the victim's clusters")
    # And it keeps following them: a change made now shows up too, in every cluster.
    for cluster in fleet.clusters:
        fleet.create_namespace(cluster, "later")
    fleet.until(lambda: all(_has_row(fleet, c, "later") for c in fleet.clusters), 20, "rows made after the takeover")
    assert fleet.watchers[survivor].poll() is None


def _api(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _offload(api: APIClient, prefix: str, namespace: str) -> int:
    response = api.put(
        f"/api/v1{prefix}/namespaces/{namespace}/offloading/", {"podOffloadingStrategy": "Remote"}, format="json"
    )
    assert response.status_code == 202, response.json()
    return int(response.json()["id"])


def test_one_clusters_api_out_the_other_keeps_working_and_the_waiting_changes_apply_when_it_returns(
    start_fleet: Any, admin_user: Any
) -> None:
    fleet = start_fleet(["rome", "milan"])
    names = ("orders", "billing")
    for cluster in fleet.clusters:
        for name in names:
            fleet.create_namespace(cluster, name)
    fleet.until(lambda: all(_has_row(fleet, c, n) for c in fleet.clusters for n in names), 30, "the rows")
    api = _api(admin_user)
    rome, milan = _prefix(fleet, "rome"), _prefix(fleet, "milan")

    fleet.faults("milan", outage=True)  # every connection to milan's API server dropped without an answer
    waiting = [_offload(api, milan, name) for name in names]
    applied = _offload(api, rome, "orders")
    fleet.until(
        lambda: ChangeRequest.objects.get(pk=applied).state == ChangeState.APPLIED, 30, "rome's change, milan out"
    )
    assert _change_id(fleet, "rome", "orders") == str(applied)
    fleet.until(
        lambda: all(ChangeRequest.objects.get(pk=pk).waiting_reason == apihealth.WAITING_FOR_API for pk in waiting),
        30,
        "milan's changes to wait for its API server",
    )
    time.sleep(2)  # a few probes later: still waiting, none given up
    for change in ChangeRequest.objects.filter(pk__in=waiting):
        assert change.state == ChangeState.QUEUED and not change.is_terminal, (change.state, change.message)
    # rome keeps working meanwhile: another change applies, its rows keep following its API server.
    again = _offload(api, rome, "billing")
    fleet.create_namespace("rome", "while-milan-is-out")
    fleet.until(
        lambda: (
            ChangeRequest.objects.get(pk=again).state == ChangeState.APPLIED
            and _has_row(fleet, "rome", "while-milan-is-out")
        ),
        30,
        "rome's second change and its new row",
    )

    fleet.faults("milan")  # milan answers again: its probe sends what waited, nothing lost
    fleet.until(
        lambda: all(ChangeRequest.objects.get(pk=pk).state == ChangeState.APPLIED for pk in waiting),
        30,
        "milan's waiting changes to apply once it is back",
    )
    for name, pk in zip(names, waiting, strict=True):
        assert _change_id(fleet, "milan", name) == str(pk)
        assert (
            AuditEvent.objects.filter(change_id=pk, managed=fleet.managed["milan"], action=AuditAction.APPLIED).count()
            == 1
        )
    assert _change_id(fleet, "rome", "billing") == str(again)
