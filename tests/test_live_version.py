"""Open pages cost O(1) while nothing moves: every writer bumps a LiveVersion counter in its own
transaction (database triggers, migration 0013), a live poll reads those counters once and answers
304 while they have not moved, and the first poll after a write renders the change. Runs on SQLite and
on PostgreSQL (scripts/with-postgres.sh)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.models import (
    AuditEvent,
    BulkRequest,
    ChangeRequest,
    ClusterOffloading,
    Namespace,
    SnapshotState,
    StatusTransition,
    livetriggers,
)
from offloading.models.inventory import KubeEvent, Pod
from offloading.snapshot import informer
from offloading.views import live

# The live counters' bumps visible inside the test's transaction (tests/fixtures/snapshot.py).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("immediate_bumps")]

POLL = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}


def _poll(client: Any, url: str, etag: str | None = None) -> Any:
    headers = dict(POLL)
    if etag:
        headers["HTTP_IF_NONE_MATCH"] = etag
    return client.get(url, **headers)


def _namespace_event(name: str, rv: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
            "creationTimestamp": "2025-01-01T00:00:00Z",
        },
        "status": {"phase": "Active"},
    }


# --------------------------------------------------------------------------------------------------
# Every kind of writer bumps the version, in its own transaction


def _watcher_batch() -> None:
    with transaction.atomic():  # what watch_cluster does with a batch
        informer.SYNCED["namespaces"].apply([("ADDED", _namespace_event("from-the-watcher", "901"))], timezone.now())


def _change_moves() -> None:
    change = ChangeRequest.objects.get(namespace="shop")
    change.state = ChangeState.APPLYING
    change.save(update_fields=["state"])


def _audit_event() -> None:
    AuditEvent(user_name="alice", source=Source.WEB, action=AuditAction.REFUSED, namespace="shop").save()


def _queryset_update() -> None:
    ClusterOffloading.objects.filter(namespace__name="shop").update(state="CreationLoopBackOff")


def _bulk_create() -> None:
    Pod.objects.bulk_create([Pod(namespace="shop", name=f"pod-{i}", phase="Running") for i in range(20)])


def _delete() -> None:
    Namespace.objects.filter(name="payments").delete()


def _bulk_request() -> None:
    BulkRequest.objects.create(action=ChangeAction.OFFLOAD, namespace_selector="team=pay", requester_name="alice")


def _transition() -> None:
    StatusTransition.objects.create(namespace="shop", old="Ready", new="SomeFailed")


def _kube_event() -> None:
    KubeEvent.objects.create(uid="e1", namespace="shop", involved_kind="Pod", involved_name="p", type="Warning")


WRITERS: dict[str, tuple[Callable[[], None], str]] = {
    "the watcher's batch write": (_watcher_batch, "namespaces"),
    "a change moving state": (_change_moves, "changes"),
    "an audit event": (_audit_event, "audit"),
    "QuerySet.update()": (_queryset_update, "offloadings"),
    "bulk_create()": (_bulk_create, "pods"),
    "a delete": (_delete, "namespaces"),
    "a bulk request": (_bulk_request, "bulk"),
    "a status transition": (_transition, "transitions"),
    "a Kubernetes event": (_kube_event, "events"),
}


@pytest.fixture
def change(fleet: Any) -> ChangeRequest:
    return ChangeRequest.objects.create(
        namespace="shop", action=ChangeAction.UPDATE, state=ChangeState.QUEUED, requester_name="alice"
    )


@pytest.mark.parametrize("writer", WRITERS, ids=list(WRITERS))
def test_every_writer_bumps_its_kind(change: Any, writer: str) -> None:
    write, kind = WRITERS[writer]
    before = live.versions()
    write()
    after = live.versions()
    assert after[kind] > before[kind], (writer, before, after)
    assert all(after[k] >= before[k] for k in live.KINDS), "a counter never goes back"


def test_a_write_rolled_back_bumps_nothing(change: Any) -> None:
    before = live.versions()
    with pytest.raises(RuntimeError), transaction.atomic():
        Namespace.objects.update(status_phase="Terminating")
        raise RuntimeError("abort")
    assert live.versions() == before
    with transaction.atomic():  # the next write in a new transaction still counts
        Namespace.objects.filter(name="shop").update(status_phase="Active")
    assert live.versions()["namespaces"] > before["namespaces"]


def test_the_snapshot_heartbeat_is_not_a_change_but_its_error_is(fleet: Any) -> None:
    before = live.versions()
    SnapshotState.touch(None, last_success_at=timezone.now(), last_attempt_at=timezone.now())
    assert live.versions() == before
    SnapshotState.touch(None, last_error="API server unreachable")
    assert live.versions()["snapshot"] > before["snapshot"]


def test_scopes_and_group_membership_bump_access(fleet: Any, django_user_model: Any) -> None:
    from django.contrib.auth.models import Group

    from access.models import Scope

    user = django_user_model.objects.create_user("olga", password="olga-password-123")
    start = live.versions()["access"]
    user.groups.add(Group.objects.get(name="operator"))
    middle = live.versions()["access"]
    Scope.objects.create(user=user, kind="glob", value="team-a-*")
    assert start < middle < live.versions()["access"]


def test_the_version_is_monotonic_over_many_writes(change: Any) -> None:
    seen = [live.versions()]
    for i in range(30):
        for write, _kind in list(WRITERS.values())[i % 3 :: 3]:
            if write is not _delete and write is not _bulk_create and write is not _kube_event:
                write()
        Namespace.objects.filter(name="shop").update(status_phase=f"p{i}")
        seen.append(live.versions())
    for older, newer in zip(seen, seen[1:], strict=False):
        assert all(newer[k] >= older[k] for k in live.KINDS)
        assert newer["namespaces"] > older["namespaces"]
    assert len({live.data_version() for _ in range(3)}) == 1, "nothing written: the same version"


# --------------------------------------------------------------------------------------------------
# The poll reads a constant number of rows whatever the fleet


@pytest.mark.parametrize("size", [10, 1000])
def test_data_version_is_one_query_at_any_fleet_size(db: Any, size: int, django_assert_num_queries: Any) -> None:
    Namespace.objects.bulk_create([Namespace(name=f"ns-{i:05}") for i in range(size)])
    ns = list(Namespace.objects.all()[: size // 2])
    ClusterOffloading.objects.bulk_create(
        [ClusterOffloading(namespace=n, cluster_id=f"c{j}", selected=True) for n in ns for j in range(2)]
    )
    StatusTransition.objects.bulk_create([StatusTransition(namespace=n.name, new="Ready") for n in ns])
    with django_assert_num_queries(1):
        live.data_version()
    with django_assert_num_queries(1):
        live.data_version(live.region_kinds("namespace_list"))


@pytest.mark.parametrize("size", [10, 1000])
def test_an_idle_poll_costs_the_same_queries_at_any_fleet_size(admin_client: Any, db: Any, size: int) -> None:
    SnapshotState.get()
    Namespace.objects.bulk_create([Namespace(name=f"ns-{i:05}") for i in range(size)])
    url = reverse("offloading:namespace_list")
    etag = _poll(admin_client, url)["ETag"]
    with CaptureQueriesContext(connection) as queries:
        assert _poll(admin_client, url, etag).status_code == 304
    live_reads = [q["sql"] for q in queries.captured_queries if "offloading_" in q["sql"]]
    assert len(live_reads) == 1 and "offloading_liveversion" in live_reads[0], live_reads
    assert len(queries.captured_queries) <= 4, [q["sql"] for q in queries.captured_queries]  # + session, user


# --------------------------------------------------------------------------------------------------
# Every live region: 304 while nothing it shows moved, the change on the next poll after a write


def _regions(change: ChangeRequest) -> dict[str, str]:
    bulk = BulkRequest.objects.create(
        action=ChangeAction.UPDATE, namespace_selector="team=pay", requester_name="alice", total=1
    )
    ChangeRequest.objects.filter(pk=change.pk).update(bulk=bulk)
    return {
        "overview": reverse("offloading:home"),
        "namespace list": reverse("offloading:namespace_list") + "?q=sh",
        "matrix": reverse("offloading:fleet_matrix"),
        "cluster list": reverse("offloading:cluster_list"),
        "cluster page": reverse("offloading:cluster_detail", args=["milan"]),
        "namespace status": reverse("offloading:namespace_status", args=["shop"]),
        "change status": reverse("offloading:change_status", args=[change.pk]),
        "bulk progress": reverse("offloading:bulk_progress", args=[bulk.pk]),
        "audit": reverse("offloading:audit_list"),
    }


def _shown_write(region: str, change: ChangeRequest) -> tuple[Callable[[], None], str]:
    """A write that ``region`` shows, and a text it shows afterwards."""

    def phase() -> None:
        Namespace.objects.filter(name="shop").update(offloading_phase="SomeFailed")

    def cell() -> None:
        ClusterOffloading.objects.filter(namespace__name="shop", cluster_id="milan").update(
            state="CreationLoopBackOff", message="quota exceeded"
        )

    def state() -> None:
        ChangeRequest.objects.filter(pk=change.pk).update(state=ChangeState.FAILED, message="boom")

    def audit() -> None:
        AuditEvent(user_name="zoe-the-auditor", source=Source.WEB, action=AuditAction.REFUSED, namespace="shop").save()

    return {
        "overview": (phase, "SomeFailed"),
        "namespace list": (phase, "SomeFailed"),
        "matrix": (cell, "CreationLoopBackOff"),
        "cluster list": (lambda: Namespace.objects.filter(name="shop").delete(), '">0<'),
        "cluster page": (cell, "quota exceeded"),
        "namespace status": (cell, "quota exceeded"),
        "change status": (state, "boom"),
        "bulk progress": (state, "failed"),
        "audit": (audit, "zoe-the-auditor"),
    }[region]


POLL_EVERY_S = {  # how often the browser polls each region (its data-poll / hx-trigger)
    "overview": 5,
    "namespace list": 2,
    "matrix": 2,
    "cluster list": 2,
    "cluster page": 5,
    "namespace status": 2,
    "change status": 1,
    "bulk progress": 1,
    "audit": 5,
}
REGION_NAMES = [
    "overview",
    "namespace list",
    "matrix",
    "cluster list",
    "cluster page",
    "namespace status",
    "change status",
    "bulk progress",
    "audit",
]


@pytest.mark.parametrize("region", REGION_NAMES)
def test_a_live_region_answers_304_until_what_it_shows_changes(
    admin_client: Any, change: Any, region: str, monkeypatch: Any
) -> None:
    url = _regions(change)[region]
    first = _poll(admin_client, url)
    assert first.status_code in (200, 286) and first["ETag"]
    etag = first["ETag"]
    for _ in range(2):
        idle = _poll(admin_client, url, etag)
        assert idle.status_code == 304 and idle.content == b""
    # A write elsewhere that this region does not show keeps it 304 (when it is not one it shows).
    if "audit" not in live.region_kinds(admin_client.get(url).resolver_match.url_name):
        _audit_event()
        assert _poll(admin_client, url, etag).status_code == 304
    write, text = _shown_write(region, change)
    write()
    # The next poll comes one poll period later (static/js/liqo-dash.js): a holder of a shared region's
    # render is not rendered again within a second (livetags.HOLD_S), shorter than every poll period.
    now = live.now_ms()
    monkeypatch.setattr(live, "now_ms", lambda: now + POLL_EVERY_S[region] * 1000)
    started = time.monotonic()
    moved = _poll(admin_client, url, etag)
    assert moved.status_code in (200, 286) and moved["ETag"] != etag
    assert text in moved.content.decode(), region
    assert time.monotonic() - started < 2.0, "the next poll (every 1-5 s) shows it"
    assert _poll(admin_client, url, moved["ETag"]).status_code == 304


def test_an_ordinary_visit_is_always_rendered(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_list")
    etag = _poll(admin_client, url)["ETag"]
    assert admin_client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_the_freshness_badge_answers_304_until_the_snapshot_moves(admin_client: Any, fleet: Any) -> None:
    now = timezone.now()
    SnapshotState.touch(None, last_success_at=now, last_attempt_at=now)
    url = reverse("offloading:freshness")
    first = _poll(admin_client, url)
    assert first.status_code == 200 and b"freshness" in first.content
    assert _poll(admin_client, url, first["ETag"]).status_code == 304
    # A heartbeat: the badge computes its age in the browser, so the poll stays 304 and says when.
    beat = now + timezone.timedelta(seconds=5)
    SnapshotState.touch(None, last_success_at=beat)
    after_beat = _poll(admin_client, url, first["ETag"])
    assert after_beat.status_code == 304 and after_beat["X-Fresh-At"]
    # What the browser cannot work out itself (an error) renders it again.
    failed = beat + timezone.timedelta(seconds=1)
    SnapshotState.touch(None, last_error="the API server did not answer", last_attempt_at=failed)
    moved = _poll(admin_client, url, first["ETag"])
    assert moved.status_code == 200 and moved["ETag"] != first["ETag"]
    assert admin_client.get(url, HTTP_IF_NONE_MATCH=moved["ETag"]).status_code == 200, "not a poll: rendered"


# --------------------------------------------------------------------------------------------------
# Scopes: the answer is per user; the version says nothing of what changed


def test_a_change_out_of_scope_leaks_nothing_through_the_etag(client: Any, fleet: Any, django_user_model: Any) -> None:
    from django.contrib.auth.models import Group

    from access.models import Scope

    Namespace.objects.create(name="team-a-web", labels={"team": "a"})
    Namespace.objects.create(name="team-b-secret", labels={"team": "b"})
    olga = django_user_model.objects.create_user("olga", password="olga-password-123")
    olga.groups.add(Group.objects.get(name="operator"))
    Scope.objects.create(user=olga, kind="glob", value="team-a-*")
    vera = django_user_model.objects.create_user("vera", password="vera-password-123")
    vera.groups.add(Group.objects.get(name="viewer"))
    url = reverse("offloading:namespace_list") + "?q=team-a"
    client.force_login(olga)
    etag = _poll(client, url)["ETag"]
    # The ETag is an opaque hash and when it was read (ms, hex): no counter, kind or namespace in it.
    assert re.fullmatch(r'"[0-9a-f]{32}\.[0-9a-f]{11,}"', etag), etag
    Namespace.objects.filter(name="team-b-secret").update(labels={"team": "b", "moved": "yes"})
    moved = _poll(client, url, etag)
    # The version moved (a 200 may come), but the page is olga's own: nothing of team-b is in it.
    assert "team-b-secret" not in moved.content.decode()
    # Another user holding olga's ETag gets their own page, never a 304 on hers.
    olga_now = moved["ETag"]
    client.force_login(vera)
    assert _poll(client, url, olga_now).status_code == 200
    assert _poll(client, url)["ETag"] != olga_now


# --------------------------------------------------------------------------------------------------
# Each region depends on the kinds it shows: its queries read only tables of those kinds

TABLE_KINDS = livetriggers.TABLES


@pytest.mark.parametrize("region", REGION_NAMES)
def test_a_region_reads_only_tables_of_its_kinds(admin_client: Any, change: Any, region: str, settings: Any) -> None:
    settings.ALERT_WEBHOOK_URL = "http://127.0.0.1:9/hook"  # the overview's notifications line reads alerts
    url = _regions(change)[region]
    with CaptureQueriesContext(connection) as queries:
        response = _poll(admin_client, url)
    kinds = set(live.region_kinds(response.resolver_match.url_name))
    tables = {table for q in queries.captured_queries for table in re.findall(r'(?:FROM|JOIN)\s+"?(\w+)"?', q["sql"])}
    unknown = {t for t in tables if t.startswith(("offloading_", "access_")) and t not in TABLE_KINDS} - set(
        livetriggers.NOT_SHOWN
    )
    assert not unknown, f"{region} reads {sorted(unknown)}: give them a kind (offloading/models/livetriggers.py)"
    read = {TABLE_KINDS[table] for table in tables if table in TABLE_KINDS}
    # The base template's badge reads the snapshot state: the badge polls on its own.
    assert read - kinds <= {"snapshot"}, (region, sorted(read - kinds))


def _triggers() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        return {row[0] for row in cursor.fetchall()}


def test_every_table_of_every_kind_has_its_triggers(db: Any) -> None:
    assert set(TABLE_KINDS.values()) == set(live.KINDS)
    existing = set(connection.introspection.table_names())
    expected = {livetriggers.trigger_name(t, e) for t in TABLE_KINDS if t in existing for e in livetriggers.EVENTS}
    assert expected <= _triggers(), sorted(expected - _triggers())
    # Every table of the app is counted, or is not page content.
    ours = {t for t in existing if t.startswith("offloading_")}
    assert ours <= set(TABLE_KINDS) | set(livetriggers.NOT_SHOWN), sorted(ours - set(TABLE_KINDS))


def test_a_table_rebuilt_by_a_later_migration_gets_its_triggers_back(db: Any) -> None:
    """SQLite drops a table's triggers when a migration rebuilds it; post_migrate installs them again."""
    from django.core.management import call_command

    with connection.cursor() as cursor:
        for event in livetriggers.EVENTS:
            name = livetriggers.trigger_name("offloading_pod", event)
            cursor.execute(f"DROP TRIGGER {name}" + (" ON offloading_pod" if connection.vendor != "sqlite" else ""))
    before = live.versions()["pods"]
    Pod.objects.create(namespace="shop", name="unseen")
    assert live.versions()["pods"] == before
    call_command("migrate", verbosity=0)  # nothing to apply: post_migrate still runs
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    Pod.objects.create(namespace="shop", name="seen")
    assert live.versions()["pods"] > before


# --------------------------------------------------------------------------------------------------
# Concurrent writers (PostgreSQL takes the counter rows only at commit, in the kinds' order)


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_several_kinds_neither_deadlock_nor_lose_a_bump() -> None:
    Namespace.objects.bulk_create([Namespace(name=f"w-{i}") for i in range(8)])
    before = live.versions()
    errors: list[BaseException] = []
    rounds = 15

    def writer(i: int) -> None:
        try:
            for r in range(rounds):
                with transaction.atomic():
                    # Half the writers touch the kinds in one order, half in the other.
                    if i % 2:
                        Namespace.objects.filter(name=f"w-{i}").update(status_phase=f"{r}")
                        StatusTransition.objects.create(namespace=f"w-{i}", new=f"{r}")
                    else:
                        StatusTransition.objects.create(namespace=f"w-{i}", new=f"{r}")
                        Namespace.objects.filter(name=f"w-{i}").update(status_phase=f"{r}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4 if connection.vendor == "sqlite" else 8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    after = live.versions()
    commits = len(threads) * rounds
    if connection.vendor == "postgresql":  # one bump per kind per transaction
        assert after["namespaces"] - before["namespaces"] == commits
        assert after["transitions"] - before["transitions"] == commits
    else:  # SQLite: one per row
        assert after["namespaces"] - before["namespaces"] >= commits
