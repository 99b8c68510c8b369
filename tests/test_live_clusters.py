"""Live versions per managed cluster (issue 28): the triggers bump ``kind@<managed pk>`` beside the global
``kind``, a cluster's page (under /m/<name>/, or the default cluster's on the paths without it) polls its
cluster's counters, so a write in milan re-renders nothing of rome's; the freshness badge under
/m/<name>/ answers for that cluster's snapshot. Runs on SQLite and on PostgreSQL (scripts/with-postgres.sh)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from offloading import middleware
from offloading.choices import ChangeAction, ChangeState
from offloading.models import (
    ChangeRequest,
    ClusterOffloading,
    ManagedCluster,
    Namespace,
    Schedule,
    SnapshotState,
    livetriggers,
)
from offloading.models.fleet import default_managed_pk
from offloading.models.inventory import Pod
from offloading.views import live
from tests.fixtures.personas import viewer_client

# The live counters' bumps visible inside the test's transaction (tests/fixtures/snapshot.py).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("immediate_bumps")]

POLL: dict[str, Any] = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}
LIST = reverse("offloading:namespace_list")
BADGE = reverse("offloading:freshness")


_LATER_MS = [0]  # how far the live checks' clock runs ahead of the real one


@pytest.fixture(autouse=True)
def _live_clock(monkeypatch: Any) -> None:
    """The live checks' clock, moved on by ``_written``: the next poll comes 2 s after a write, when the
    render a viewer holds is more than a second old (a holder is not rendered again within livetags.HOLD_S,
    so a 304 after it is the counters' answer)."""
    _LATER_MS[0] = 0
    monkeypatch.setattr(live, "now_ms", lambda: int(time.time() * 1000) + _LATER_MS[0])


@pytest.fixture
def two(fleet: Any) -> dict[str, ManagedCluster]:
    """rome and milan, two managed clusters beside the default one (the fleet fixture's rows), each with a
    namespace and a fresh snapshot."""
    clusters = {name: ManagedCluster.objects.create(name=name, context=name) for name in ("rome", "milan")}
    now = timezone.now()
    for name, cluster in clusters.items():
        Namespace.objects.create(name=f"{name}-shop", managed=cluster)
        SnapshotState.touch(cluster, last_success_at=now, last_attempt_at=now, local_cluster_id=name)
    return clusters


def _counters(kind: str, *clusters: ManagedCluster) -> list[int]:
    keys = (kind, *(livetriggers.cluster_kind(kind, cluster.pk) for cluster in clusters))
    found = live.versions(keys)
    return [found[key] for key in keys]


def _poll(client: Client, url: str, etag: str = "") -> Any:
    headers: dict[str, Any] = {**POLL, **({"HTTP_IF_NONE_MATCH": etag} if etag else {})}
    return client.get(url, **headers)


def _early(response: Any) -> bool:
    """Whether LivePollMiddleware answered (before the authentication middleware set request.user)."""
    return not hasattr(response.wsgi_request, "user")


# --------------------------------------------------------------------------------------------------
# The counters: a write moves its cluster's and the global one, never another cluster's


def _namespace_written(cluster: ManagedCluster) -> None:
    Namespace.objects.create(name="new-one", managed=cluster)


def _updated(cluster: ManagedCluster) -> None:
    Namespace.objects.filter(managed=cluster).update(status_phase="Terminating")


def _deleted(cluster: ManagedCluster) -> None:
    Namespace.objects.filter(managed=cluster).delete()


def _bulk_created(cluster: ManagedCluster) -> None:
    Pod.objects.bulk_create(
        [Pod(namespace="shop", name=f"pod-{i}", phase="Running", managed=cluster) for i in range(5)]
    )


def _snapshot_error(cluster: ManagedCluster) -> None:
    SnapshotState.touch(cluster, last_error="the API server said no")


WRITES = {
    "an insert": (_namespace_written, "namespaces"),
    "QuerySet.update()": (_updated, "namespaces"),
    "a delete": (_deleted, "namespaces"),
    "bulk_create()": (_bulk_created, "pods"),
    "the snapshot's error": (_snapshot_error, "snapshot"),
}


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
def test_a_write_in_milan_moves_milans_and_the_global_version_not_romes(two: Any, write: str) -> None:
    writer, kind = WRITES[write]
    rome, milan = two["rome"], two["milan"]
    before = _counters(kind, milan, rome)
    writer(milan)
    (everywhere, in_milan, in_rome), (everywhere_0, in_milan_0, in_rome_0) = _counters(kind, milan, rome), before
    assert everywhere > everywhere_0 and in_milan > in_milan_0, write
    assert in_rome == in_rome_0, write


def test_a_row_moved_to_another_cluster_moves_both(two: Any) -> None:
    rome, milan = two["rome"], two["milan"]
    before = _counters("namespaces", milan, rome)
    Namespace.objects.filter(name="milan-shop").update(managed=rome)
    after = _counters("namespaces", milan, rome)
    assert all(now > then for now, then in zip(after, before, strict=True)), (before, after)


def test_a_cascade_moves_the_counters_of_the_deleted_rows_cluster(two: Any) -> None:
    milan = two["milan"]
    shop = Namespace.objects.get(name="milan-shop")
    ClusterOffloading.objects.create(namespace=shop, cluster_id="naples", managed=milan)
    before = _counters("offloadings", milan, two["rome"])
    shop.delete()
    after = _counters("offloadings", milan, two["rome"])
    assert after[0] > before[0] and after[1] > before[1] and after[2] == before[2]


def test_approvals_and_schedules_have_their_own_global_kind(two: Any) -> None:
    change = ChangeRequest.objects.create(
        namespace="milan-shop",
        action=ChangeAction.UPDATE,
        state=ChangeState.QUEUED,
        requester_name="alice",
        managed=two["milan"],
    )
    before = live.versions(("changes", "governance"))
    Schedule.objects.create(change=change, not_before=timezone.now() + timedelta(hours=1))
    after = live.versions(("changes", "governance"))
    assert after["governance"] > before["governance"] and after["changes"] == before["changes"]
    for region in ("namespace_status", "change_status", "audit_list", "bulk_progress"):
        assert "governance" in live.region_kinds(region), region


def test_the_global_only_kinds_are_the_tables_that_name_no_cluster() -> None:
    """livetriggers.PER_CLUSTER (the models' side) and live.GLOBAL_KINDS (the polls' side) agree."""
    global_tables = {table for table, kind in livetriggers.TABLES.items() if kind in live.GLOBAL_KINDS}
    assert set(livetriggers.TABLES) - global_tables == set(livetriggers.PER_CLUSTER)
    assert {"offloading_approval", "offloading_schedule", "access_scope"} <= global_tables


def test_versions_by_cluster_name_find_its_pk_in_the_same_read(two: Any, django_assert_num_queries: Any) -> None:
    milan = two["milan"]
    Namespace.objects.create(name="another", managed=milan)
    with django_assert_num_queries(1):
        found = live.versions(("access",), cluster="milan", scoped=("namespaces", "pods"))
    assert found[live.CLUSTER_KEY] == milan.pk
    assert found[f"namespaces@{milan.pk}"] == live.versions((f"namespaces@{milan.pk}",))[f"namespaces@{milan.pk}"] > 0
    assert f"pods@{milan.pk}" in found and "access" in found
    assert live.CLUSTER_KEY not in live.versions(("access",), cluster="nowhere", scoped=("namespaces",))


def test_a_default_cluster_page_and_a_prefixed_one_poll_their_clusters_counters(two: Any) -> None:
    default, milan = default_managed_pk(), two["milan"].pk
    assert live.poll_kinds("namespace_list", default) == tuple(
        kind if kind in live.GLOBAL_KINDS else f"{kind}@{default}" for kind in live.region_kinds("namespace_list")
    )
    found = live.early_counters("namespace_list", "milan", live.IDENTITY)
    assert found is not None and found[1] == milan
    assert set(live.poll_kinds("namespace_list", milan)) <= set(found[0])
    assert live.early_counters("namespace_list", "nowhere", live.IDENTITY) is None


# --------------------------------------------------------------------------------------------------
# The pages: rome's do not re-render on milan's writes, and do on rome's


def _written(cluster: ManagedCluster | None, name: str) -> None:
    """A namespace ``name`` made in ``cluster`` (None: the default one); the next poll comes 2 s later."""
    Namespace.objects.create(name=name, managed_id=cluster.pk if cluster else default_managed_pk())
    _LATER_MS[0] += 2000


@pytest.mark.parametrize("early", [True, False], ids=["answered early", "through the chain"])
def test_a_rome_page_does_not_re_render_on_milans_write_and_does_on_romes(
    two: Any, django_user_model: Any, monkeypatch: Any, early: bool
) -> None:
    client = viewer_client(django_user_model)
    if not early:  # LivePollMiddleware recognises no one: the view's live.page decides
        monkeypatch.setattr(middleware, "_viewer", lambda request, marks: None)
    url = f"/m/rome{LIST}"
    first = _poll(client, url)
    assert first.status_code == 200 and "rome-shop" in first.content.decode()
    _written(two["milan"], "made-in-milan")
    idle = _poll(client, url, first["ETag"])
    assert idle.status_code == 304 and _early(idle) == early
    _written(two["rome"], "made-in-rome")
    moved = _poll(client, url, first["ETag"])
    assert moved.status_code == 200 and moved["ETag"] != first["ETag"]
    assert "made-in-rome" in moved.content.decode() and "made-in-milan" not in moved.content.decode()


def test_the_default_clusters_page_does_not_re_render_on_milans_write(two: Any, django_user_model: Any) -> None:
    client = viewer_client(django_user_model)
    first = _poll(client, LIST)
    assert first.status_code == 200 and "rome-shop" not in first.content.decode()
    _written(two["milan"], "made-in-milan")
    assert _poll(client, LIST, first["ETag"]).status_code == 304
    _written(None, "made-here")
    moved = _poll(client, LIST, first["ETag"])
    assert moved.status_code == 200 and "made-here" in moved.content.decode()


@pytest.mark.parametrize("prefix", ["", "/m/rome"], ids=["the whole domain", "rome's neighbourhood"])
def test_the_domain_map_polls_the_fleets_counters(two: Any, django_user_model: Any, prefix: str) -> None:
    """The domain map draws every managed cluster (a cluster's own path its neighbourhood, with its providers'
    counts): a write in milan moves it, wherever it is polled from."""
    client = viewer_client(django_user_model)
    url = prefix + reverse("offloading:domain_map")
    first = _poll(client, url)
    assert first.status_code == 200
    idle = _poll(client, url, first["ETag"])
    assert idle.status_code == 304
    _written(two["milan"], "made-in-milan")
    assert _poll(client, url, first["ETag"]).status_code == 200


def test_a_prefixed_idle_poll_costs_one_read_as_the_default_ones(two: Any, django_user_model: Any) -> None:
    client = viewer_client(django_user_model)
    url = f"/m/rome{LIST}"
    first = _poll(client, url)
    with CaptureQueriesContext(connection) as queries:
        idle = _poll(client, url, first["ETag"])
    assert idle.status_code == 304 and _early(idle)
    sql = [q["sql"] for q in queries.captured_queries]
    # The counters, the cluster's pk by its name and the identity counters: one statement.
    assert len(sql) == 1 and "offloading_liveversion" in sql[0] and "offloading_managedcluster" in sql[0], sql


def test_an_unknown_clusters_poll_is_left_to_the_view(two: Any, django_user_model: Any) -> None:
    client = viewer_client(django_user_model)
    first = _poll(client, f"/m/rome{LIST}")
    ManagedCluster.objects.filter(name="rome").delete()
    gone = _poll(client, f"/m/rome{LIST}", first["ETag"])
    assert gone.status_code == 404 and not _early(gone) and not gone.has_header("ETag")
    assert _poll(client, f"/m/nowhere{BADGE}").status_code == 404


# --------------------------------------------------------------------------------------------------
# The freshness badge: each cluster's pages poll their cluster's


def test_each_clusters_page_polls_its_own_badge(two: Any, django_user_model: Any) -> None:
    client = viewer_client(django_user_model)
    page = client.get(f"/m/milan{LIST}").content.decode()
    assert f'hx-get="/m/milan{BADGE}"' in page
    assert f'hx-get="{BADGE}"' in client.get(LIST).content.decode()


def test_the_badge_under_milan_shows_milans_staleness_while_rome_is_fresh(two: Any, django_user_model: Any) -> None:
    client = viewer_client(django_user_model)
    rome_first = _poll(client, f"/m/rome{BADGE}")
    milan_first = _poll(client, f"/m/milan{BADGE}")
    assert 'data-level="fresh"' in rome_first.content.decode()
    assert 'data-level="fresh"' in milan_first.content.decode()
    assert rome_first["ETag"] != milan_first["ETag"]  # one cluster's badge is never a 304 of another's
    # milan's watcher went quiet ten minutes ago; rome's beats on.
    then = timezone.now() - timedelta(minutes=10)
    SnapshotState.touch(two["milan"], last_success_at=then, last_attempt_at=then)
    with CaptureQueriesContext(connection) as queries:
        milan = _poll(client, f"/m/milan{BADGE}", milan_first["ETag"])
    assert milan.status_code == 200 and _early(milan) and 'data-level="red"' in milan.content.decode()
    assert len(queries) <= 3, [q["sql"] for q in queries.captured_queries]  # as the default's badge
    SnapshotState.touch(two["rome"], last_success_at=timezone.now())
    rome = _poll(client, f"/m/rome{BADGE}", rome_first["ETag"])
    assert rome.status_code == 304 and _early(rome)
    # The chain's answer (the view, in_cluster) is the same cluster's.
    fresh_view = client.get(f"/m/milan{BADGE}")
    assert fresh_view.status_code == 200 and 'data-level="red"' in fresh_view.content.decode()
    assert 'data-level="fresh"' in client.get(f"/m/rome{BADGE}").content.decode()


def test_an_error_in_milan_leaves_the_default_badge_fresh(two: Any, django_user_model: Any) -> None:
    client = viewer_client(django_user_model)
    SnapshotState.touch(None, last_success_at=timezone.now(), last_attempt_at=timezone.now())
    first = _poll(client, BADGE)
    SnapshotState.touch(two["milan"], last_attempt_at=timezone.now() + timedelta(seconds=1), last_error="boom")
    assert _poll(client, BADGE, first["ETag"]).status_code == 304
    assert "boom" in _poll(client, f"/m/milan{BADGE}").content.decode()


# --------------------------------------------------------------------------------------------------
# Committed for real: concurrent writers in two clusters (PostgreSQL bumps at commit, in the kinds' order)


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_in_two_clusters_lose_no_bump_and_cross_none() -> None:
    clusters = [ManagedCluster.objects.create(name=name, context=name) for name in ("rome", "milan")]
    for cluster in clusters:
        Namespace.objects.bulk_create([Namespace(name=f"w-{i}", managed=cluster) for i in range(4)])
    before = live.versions(("namespaces", *(f"namespaces@{c.pk}" for c in clusters)))
    errors: list[BaseException] = []
    rounds = 10

    def writer(i: int) -> None:
        cluster = clusters[i % 2]
        try:
            for r in range(rounds):
                with transaction.atomic():
                    Namespace.objects.filter(managed=cluster, name=f"w-{i}").update(status_phase=f"{r}")
                    Pod.objects.create(namespace=f"w-{i}", name=f"p-{i}-{r}", managed=cluster)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    after = live.versions(("namespaces", *(f"namespaces@{c.pk}" for c in clusters)))
    per_cluster = rounds * len(threads) // 2
    # One namespace row per transaction: one bump per transaction on either database (PostgreSQL bumps once
    # per kind per transaction, SQLite once per row), in its own cluster only.
    for cluster in clusters:
        key = f"namespaces@{cluster.pk}"
        assert after[key] - before[key] == per_cluster, key
    assert after["namespaces"] - before["namespaces"] == 2 * per_cluster
