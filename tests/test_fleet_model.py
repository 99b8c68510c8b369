"""Issue 28, the data model's first stage: every snapshot, inventory and mapping row belongs to a managed
cluster. Two clusters' snapshots written through the real writers (the watcher's kinds, the full
refresh, the offloading store, the NamespaceMaps) coexist with the same names, and one cluster's
sweeps, relists and refreshes leave the other's rows alone; SnapshotState is one row per cluster; the
migrations move existing rows to the default cluster; rows written without a cluster cost no query
each. Runs on SQLite and on PostgreSQL (scripts/with-postgres.sh)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from offloading.changes.sweep import trim_history
from offloading.cluster import kube
from offloading.models import (
    Cluster,
    ClusterOffloading,
    KubeEvent,
    LiqoResource,
    ManagedCluster,
    MappingEntry,
    Namespace,
    PeerNamespaceMap,
    Pod,
    SnapshotState,
    StatusTransition,
    VirtualNode,
    livetriggers,
)
from offloading.models import fleet as fleetkey
from offloading.models.managed import Credentials, ensure_configured
from offloading.snapshot import informer
from offloading.snapshot.engine import SnapshotWriter
from offloading.snapshot.namespacemaps import forget_maps, write_map
from offloading.snapshot.refresh import refresh
from offloading.snapshot.store import store_offloading
from sandbox.kinds import NAMESPACES

SNAPSHOT_MODELS = (
    SnapshotState,
    Cluster,
    VirtualNode,
    Namespace,
    ClusterOffloading,
    StatusTransition,
    Pod,
    KubeEvent,
    LiqoResource,
    PeerNamespaceMap,
    MappingEntry,
)
BEFORE = ("offloading", "0022_audit_cluster_actions")  # the migration before the fleet model


@pytest.fixture
def default(db: Any) -> ManagedCluster:
    return ensure_configured([])[0]


@pytest.fixture
def milan(db: Any) -> ManagedCluster:
    return ManagedCluster.objects.create(name="milan", context="milan")


def _names(managed: ManagedCluster) -> set[str]:
    return set(Namespace.objects.filter(managed=managed).values_list("name", flat=True))


def _namespace(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": {}}, "status": {"phase": "Active"}}


def _offloading(namespace: str, phase: str, peer: str, rv: str) -> dict[str, Any]:
    ready = "True" if phase == "Ready" else "False"
    return {
        "metadata": {"name": "offloading", "namespace": namespace, "uid": f"uid-{namespace}", "resourceVersion": rv},
        "spec": {"podOffloadingStrategy": "LocalAndRemote"},
        "status": {
            "offloadingPhase": phase,
            "remoteNamespaceName": namespace,
            "remoteNamespacesConditions": {
                peer: [
                    {"type": "OffloadingRequired", "status": "True", "reason": "ClusterSelected"},
                    {"type": "Ready", "status": ready, "reason": "NamespaceCreated" if ready == "True" else "Waiting"},
                ]
            },
        },
    }


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": f"{namespace}-{name}"}, "status": {}}


def _event(uid: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": uid, "uid": uid},
        "involvedObject": {"kind": "NamespaceOffloading", "name": "offloading", "namespace": namespace},
        "type": "Warning",
        "reason": "Invalid",
        "message": "a warning",
    }


def _namespace_map(peer: str, local: str) -> dict[str, Any]:
    labels = {"liqo.io/replication": "true", "liqo.io/remoteID": peer, "liqo.io/remote-cluster-id": peer}
    return {
        "metadata": {"namespace": f"liqo-tenant-{peer}", "name": peer, "labels": labels, "resourceVersion": "3"},
        "spec": {"desiredMapping": {local: local}},
        "status": {"currentMapping": {local: {"remoteNamespace": local, "phase": "Accepted"}}},
    }


def _relist(writer: SnapshotWriter, kind: str, items: list[dict[str, Any]]) -> None:
    """What a KindWatcher's relist hands its writer: the pages, then the keys it saw."""
    writer.page(kind, items)
    writer.relisted(kind, {writer.synced[kind].key(obj) for obj in items})


# --------------------------------------------------------------------------------------------------
# Two clusters through the watcher's writer


@pytest.mark.django_db(transaction=True)  # the writer closes its connection after each batch, as in the watcher
def test_two_clusters_snapshots_coexist_through_the_watchers_writer(
    default: ManagedCluster, milan: ManagedCluster
) -> None:
    stop = threading.Event()
    rome_writer = SnapshotWriter(stop, background=False)  # no cluster named: the default one
    milan_writer = SnapshotWriter(stop, background=False, managed=milan)
    assert rome_writer.synced is informer.SYNCED and milan_writer.synced is not informer.SYNCED
    for writer, names, phase in (
        (rome_writer, ["shop", "payments"], "Ready"),
        (milan_writer, ["shop", "etl"], "InProgress"),
    ):
        _relist(writer, "namespaces", [_namespace(name) for name in names])
        _relist(writer, "namespaceoffloadings", [_offloading("shop", phase, "naples", "7")])
        _relist(writer, "foreignclusters", [{"metadata": {"name": "naples"}, "spec": {"clusterID": "naples"}}])
        _relist(writer, "pods", [_pod("shop", "web-1")])
        _relist(writer, "events", [_event("ev-1", "shop")])
        _relist(writer, "namespacemaps", [_namespace_map("naples", "shop")])
        _relist(writer, "tenants", [{"metadata": {"namespace": "liqo-tenant-naples", "name": "naples"}}])

    assert (_names(default), _names(milan)) == ({"shop", "payments"}, {"shop", "etl"})
    phases = dict(Namespace.objects.filter(name="shop").values_list("managed", "offloading_phase"))
    assert phases == {default.pk: "Ready", milan.pk: "InProgress"}
    for managed in (default, milan):
        shop = Namespace.objects.get(managed=managed, name="shop")
        assert list(ClusterOffloading.objects.filter(namespace=shop).values_list("managed", "cluster_id")) == [
            (managed.pk, "naples")
        ]
        for model in (Cluster, Pod, KubeEvent, PeerNamespaceMap, MappingEntry, LiqoResource):
            assert model.objects.filter(managed=managed).count() == 1, model.__name__
        assert SnapshotState.objects.filter(managed=managed).count() == 1

    # One cluster's relists forget only its own rows: rome lost payments, its pod, event, peer and map.
    for kind in ("namespaces", "pods", "events", "foreignclusters", "namespacemaps", "tenants"):
        _relist(rome_writer, kind, [_namespace("shop")] if kind == "namespaces" else [])
    assert (_names(default), _names(milan)) == ({"shop"}, {"shop", "etl"})
    for model in (Cluster, Pod, KubeEvent, PeerNamespaceMap, MappingEntry, LiqoResource):
        assert not model.objects.filter(managed=default).exists(), model.__name__
        assert model.objects.filter(managed=milan).count() == 1, model.__name__
    # A deleted offloading in milan leaves rome's offloaded namespace of the same name as it was.
    milan_writer.event("namespaceoffloadings", "DELETED", _offloading("shop", "InProgress", "naples", "8"))
    assert Namespace.objects.get(managed=milan, name="shop").offloaded is False
    assert Namespace.objects.get(managed=default, name="shop").offloading_phase == "Ready"

    # Each cluster's SnapshotState is its own row.
    milan_writer.failed("milan's API server is down")
    rome_writer.heartbeat(force=True)
    assert SnapshotState.get(milan).last_error == "milan's API server is down"
    assert SnapshotState.get().last_error == "" and SnapshotState.get().last_success_at is not None
    assert SnapshotState.get(milan).last_success_at is None
    found = SnapshotState.find()
    assert found is not None and SnapshotState.get().pk == found.pk == SnapshotState.get(default).pk


def test_the_offloading_store_and_the_namespacemaps_write_only_their_cluster(
    default: ManagedCluster, milan: ManagedCluster
) -> None:
    for managed in (default, milan):
        Namespace.objects.create(managed=managed, name="shop")
        write_map(_namespace_map("naples", "shop"), timezone.now(), managed)
    store_offloading("shop", _offloading("shop", "Ready", "naples", "9"), managed=milan)
    assert Namespace.objects.get(managed=milan, name="shop").offloading_phase == "Ready"
    assert Namespace.objects.get(managed=default, name="shop").offloaded is False
    assert set(StatusTransition.objects.values_list("managed", flat=True)) == {milan.pk}
    forget_maps(keep=set())  # the default cluster's maps only
    assert list(PeerNamespaceMap.objects.values_list("managed", flat=True)) == [milan.pk]
    assert list(MappingEntry.objects.values_list("managed", flat=True)) == [milan.pk]


def test_history_is_trimmed_per_cluster(default: ManagedCluster, milan: ManagedCluster) -> None:
    for managed, count in ((default, 5), (milan, 3)):
        StatusTransition.objects.bulk_create(
            StatusTransition(managed=managed, namespace="shop", old=str(i), new=str(i + 1)) for i in range(count)
        )
    assert trim_history(limit=3) == 2
    counts = dict(StatusTransition.objects.values_list("managed").annotate(n=Count("id")).order_by())
    assert counts == {default.pk: 3, milan.pk: 3}


# --------------------------------------------------------------------------------------------------
# The full refresh, against the sandbox's API server


def test_a_refresh_of_one_cluster_leaves_the_others_rows(
    sandbox: Any, default: ManagedCluster, key: str, fresh_clients: None
) -> None:
    # milan is registered with the sandbox's own URL and token: both snapshots are listed from the same
    # API server (each through its cluster's client), the same namespace names, peers and virtual nodes
    # in two clusters.
    milan = ManagedCluster(name="milan", source="credentials", api_server_url=sandbox.url)
    milan.set_credentials(Credentials(token=sandbox.kubeconfig()["users"][0]["user"]["token"]))
    milan.save()
    sandbox.server.create(NAMESPACES, "", {"metadata": {"name": "leaving"}}, manager="kubectl")
    assert refresh().ok and refresh(milan).ok
    listed = _names(default)
    assert "leaving" in listed and _names(milan) == listed
    assert Cluster.objects.filter(managed=milan).count() == Cluster.objects.filter(managed=default).count() > 0
    assert VirtualNode.objects.filter(managed=milan).count() == VirtualNode.objects.filter(managed=default).count()
    sandbox.server.create(NAMESPACES, "", {"metadata": {"name": "only-in-rome"}}, manager="kubectl")
    sandbox.server.delete(NAMESPACES, "", "leaving")
    assert refresh().ok
    assert _names(default) == (listed - {"leaving"}) | {"only-in-rome"}
    assert _names(milan) == listed, "a refresh of the default cluster swept nothing of milan's"
    states = SnapshotState.objects.filter(managed__in=[default, milan])
    assert states.count() == 2 and all(state.last_success_at for state in states)


# --------------------------------------------------------------------------------------------------
# Rows written without a cluster: the default one, at no query per row


def _managed_queries(queries: CaptureQueriesContext) -> int:
    return sum("offloading_managedcluster" in q["sql"] for q in queries.captured_queries)


def test_bulk_create_without_a_cluster_costs_o1_queries(default: ManagedCluster, milan: ManagedCluster) -> None:
    fleetkey.forget_default()
    rows = [Pod(namespace="shop", name=f"pod-{i:05d}") for i in range(10_000)]
    assert all(row.managed_id is None for row in rows), "nothing is looked up when a row is only built"
    with CaptureQueriesContext(connection) as unnamed:
        Pod.objects.bulk_create(rows, batch_size=500)
    named = [Pod(managed=milan, namespace="shop", name=f"pod-{i:05d}") for i in range(10_000)]
    with CaptureQueriesContext(connection) as explicit:
        Pod.objects.bulk_create(named, batch_size=500)
    assert _managed_queries(unnamed) <= 1, unnamed.captured_queries[:3]
    assert len(unnamed) <= len(explicit) + 1
    assert Pod.objects.filter(managed=default).count() == Pod.objects.filter(managed=milan).count() == 10_000
    with CaptureQueriesContext(connection) as again:  # the memo holds for the rest of the transaction
        Namespace.objects.create(name="shop")
    assert _managed_queries(again) == 0 and len(again) == 1


def test_the_memo_forgets_a_default_made_in_a_rolled_back_transaction(default: ManagedCluster) -> None:
    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        ManagedCluster.objects.all().delete()
        (replacement,) = ensure_configured([])
        assert Namespace.objects.create(name="inside").managed_id == replacement.pk != default.pk
        raise Undo
    # The replacement is gone with the rollback: rows now go to the default cluster that is there.
    assert Namespace.objects.create(name="after").managed_id == default.pk


@pytest.mark.django_db(transaction=True)
def test_the_memo_follows_a_flush() -> None:
    # A default cluster whose key a flush will not give again (the flush restarts the keys at 1).
    ManagedCluster.objects.filter(is_default=True).delete()
    ManagedCluster.objects.create(name="filler", context="filler")
    (old,) = ensure_configured([])
    assert Namespace.objects.create(name="before-flush").managed_id == old.pk > 1  # memoised, committed
    call_command("flush", interactive=False, verbosity=0)  # every row goes, the default cluster's too
    row = Namespace.objects.create(name="after-flush")  # made again by ensure_configured
    assert row.managed_id == ManagedCluster.objects.get(is_default=True).pk != old.pk


@pytest.mark.django_db(transaction=True)
def test_a_default_read_before_the_default_changed_is_not_kept() -> None:
    """A transaction that read the default's key while another thread changed the default (its save
    forgets the memo) must not promote the old key into the memo at its commit."""
    (old,) = ensure_configured([])
    fleetkey.forget_default()
    with transaction.atomic():
        assert fleetkey.default_managed_pk() == old.pk  # provisional, in this transaction
        fleetkey.forget_default()  # another thread saved a ManagedCluster meanwhile
    assert fleetkey._committed == {}  # not promoted: the next write reads the default again
    fleetkey.default_managed_pk()
    assert list(fleetkey._committed.values())[0][0] == old.pk


# --------------------------------------------------------------------------------------------------
# The migrations


@pytest.fixture
def before_the_fleet_model(transactional_db: Any) -> Iterator[Any]:
    """The database before the fleet model (BEFORE) (historical models), then migrated forward again."""
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes("offloading")
    executor.migrate([BEFORE])
    # What `migrate` does after it (post_migrate): the live triggers for the tables as they are now (on
    # PostgreSQL the per-cluster ones would still name the managed column the migrations just dropped).
    livetriggers.install(connection)
    yield executor.loader.project_state([BEFORE]).apps
    MigrationExecutor(connection).migrate(leaves)
    emit_post_migrate_signal(0, False, connection.alias)  # what `migrate` does: triggers, the memo


def _old_rows(apps: Any) -> None:
    """One row of every snapshot table, as a single-cluster install holds them."""
    model = lambda name: apps.get_model("offloading", name)  # noqa: E731
    model("SnapshotState").objects.create(pk=1, local_cluster_id="rome")
    model("Cluster").objects.create(cluster_id="naples", name="naples")
    model("VirtualNode").objects.create(namespace="liqo-tenant-naples", name="naples", cluster_id="naples")
    shop = model("Namespace").objects.create(name="shop", offloaded=True, offloading_phase="Ready")
    model("ClusterOffloading").objects.create(namespace=shop, cluster_id="naples", selected=True)
    model("StatusTransition").objects.create(namespace="shop", new="Ready")
    model("Pod").objects.create(namespace="shop", name="web")
    model("KubeEvent").objects.create(uid="e1", namespace="shop", involved_kind="Namespace", involved_name="shop")
    model("LiqoResource").objects.create(kind="tenants", namespace="liqo-tenant-naples", name="naples")
    nm = model("PeerNamespaceMap").objects.create(cluster_id="naples", namespace="liqo-tenant-naples", name="naples")
    model("MappingEntry").objects.create(namespace_map=nm, cluster_id="naples", namespace="shop")


def _migrate_forward() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("offloading"))
    emit_post_migrate_signal(0, False, connection.alias)


def test_the_migrations_move_existing_rows_to_the_default_cluster(before_the_fleet_model: Any) -> None:
    apps = before_the_fleet_model
    clusters = apps.get_model("offloading", "ManagedCluster")
    # 0021 made it (an earlier transactional test may have flushed it: made again as 0021 does).
    old_default, _ = clusters.objects.get_or_create(is_default=True, defaults={"name": "default"})
    _old_rows(apps)
    _migrate_forward()
    for model in SNAPSHOT_MODELS:
        assert list(model.objects.values_list("managed", flat=True)) == [old_default.pk], model.__name__
    assert SnapshotState.get().local_cluster_id == "rome"
    # Every table still has its live-version triggers (SQLite drops them when a migration rebuilds a table).
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        triggers = {row[0] for row in cursor.fetchall()}
    expected = {
        livetriggers.trigger_name(model._meta.db_table, event)
        for model in SNAPSHOT_MODELS
        for event in livetriggers.EVENTS
    }
    assert expected <= triggers, sorted(expected - triggers)
    # The names are unique per cluster now: another cluster may hold a "shop" too, the default may not.
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    Namespace.objects.create(managed=milan, name="shop")
    with pytest.raises(Exception) as raised, transaction.atomic():
        Namespace.objects.create(managed_id=old_default.pk, name="shop")
    assert "unique" in str(raised.value).lower()


def test_a_row_written_by_the_old_code_during_the_upgrade_moves_too(before_the_fleet_model: Any) -> None:
    """A watcher of the previous version still writing between 0024 and 0025 leaves rows without a
    cluster: 0025 moves them as 0024 did, instead of failing to make the column required."""
    apps = before_the_fleet_model
    clusters = apps.get_model("offloading", "ManagedCluster")
    old_default, _ = clusters.objects.get_or_create(is_default=True, defaults={"name": "default"})
    filled = ("offloading", "0024_snapshot_managed_fill")
    executor = MigrationExecutor(connection)
    executor.migrate([filled])
    late = executor.loader.project_state([filled]).apps
    late.get_model("offloading", "Namespace").objects.create(name="late")  # no cluster: the old code's write
    late.get_model("offloading", "Pod").objects.create(namespace="late", name="web")
    _migrate_forward()
    assert Namespace.objects.get(name="late").managed_id == old_default.pk
    assert Pod.objects.get(name="web").managed_id == old_default.pk


def test_the_migrations_make_the_default_cluster_when_rows_have_none(before_the_fleet_model: Any) -> None:
    apps = before_the_fleet_model
    clusters = apps.get_model("offloading", "ManagedCluster")
    clusters.objects.all().delete()
    clusters.objects.create(name="default", context="kind-rome")  # the name is taken, not by a default
    _old_rows(apps)
    _migrate_forward()
    made = ManagedCluster.objects.get(is_default=True)
    assert (made.name, made.source, made.context) == ("default-2", "context", "")
    assert set(Namespace.objects.values_list("managed", flat=True)) == {made.pk}


def test_the_migrations_make_no_cluster_without_rows(before_the_fleet_model: Any) -> None:
    before_the_fleet_model.get_model("offloading", "ManagedCluster").objects.all().delete()
    _migrate_forward()
    assert not ManagedCluster.objects.exists()


def test_every_snapshot_table_has_the_key() -> None:
    for model in SNAPSHOT_MODELS:
        field = model._meta.get_field("managed")
        assert isinstance(field, fleetkey.ManagedClusterKey) and not field.null, model.__name__
        assert field.remote_field.on_delete.__name__ == "CASCADE"
    assert kube.WATCHED_KINDS and set(informer.build()) == set(kube.WATCHED_KINDS)
