"""Every managed cluster's snapshot is kept (issue 28, stage 2b): the watcher (``manage.py watch_cluster``,
run here in a thread with leader election on) runs a KindWatcher per kind and a SnapshotWriter for each
cluster it holds, on that cluster's own client. Against a sandbox domain of two API servers (rome, the
default cluster, and milan, registered as the managed cluster ``milan-eu``), each cluster's rows land
under its own ``managed`` and nothing crosses; milan's outage marks only milan's snapshot; a lost lease
stops milan's writer; new connection details start milan's engine again on them; drift is audited in
both, each event under its cluster. The refresh (and beat's
periodic one) works per cluster too."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from liqo_rules.constants import GROUP, VERSION
from offloading.audit.trail import verify
from offloading.cluster import breaker, kube
from offloading.cluster.shares import cluster_lease_name
from offloading.management.commands import watch_cluster
from offloading.models import AuditEvent, Cluster, ClusterOffloading, ManagedCluster, Namespace, SnapshotState
from offloading.models.managed import ensure_configured
from offloading.snapshot import refresh as snapshot
from offloading.snapshot.engine import SnapshotWriter
from sandbox.domain import Domain

PLURAL = "namespaceoffloadings"
LEASE_NAMESPACE = "default"
MILAN = "milan-eu"  # the managed cluster's name: not its context's, so that the two are never confused


class Api:
    """The kubernetes client of one sandbox cluster (a context of the domain's kubeconfig)."""

    def __init__(self, kubeconfig: Path, context: str) -> None:
        self.client = k8s_config.new_client_from_config(config_file=str(kubeconfig), context=context)
        self.core = k8s_client.CoreV1Api(self.client)
        self.custom = k8s_client.CustomObjectsApi(self.client)

    def namespace(self, name: str) -> None:
        self.core.create_namespace({"metadata": {"name": name}})

    def offload(self, namespace: str, strategy: str) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {"podOffloadingStrategy": strategy},
        }
        self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def restrategy(self, namespace: str, strategy: str) -> None:
        patch = {"spec": {"podOffloadingStrategy": strategy}}
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "offloading", patch)

    def namespaces(self) -> set[str]:
        return {item.metadata.name for item in self.core.list_namespace().items}

    def peers(self) -> set[str]:
        found = self.custom.list_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters")
        return {fc["spec"].get("clusterID") or fc["metadata"]["name"] for fc in found["items"]}


class Fleet:
    """The domain, both clusters' rows and clients, and the watcher running in a thread."""

    def __init__(self, domain: Domain, kubeconfig: Path) -> None:
        self.domain = domain
        (self.rome,) = ensure_configured([])  # the default cluster: the kubeconfig's current context, rome
        self.milan = ManagedCluster.objects.create(name=MILAN, context="milan")
        self.rome_api, self.milan_api = Api(kubeconfig, "rome"), Api(kubeconfig, "milan")
        self.command = watch_cluster.Command(stdout=io.StringIO(), stderr=io.StringIO())
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self.command.handle, kwargs={"timeout_seconds": 5}, name="watch-cluster", daemon=True
        )
        self.thread.start()
        self.until(lambda: len(getattr(self.command, "running", {})) == 2, 30, "both engines")

    def stop(self) -> None:
        watch_cluster._terminating.set()
        if self.thread is not None:
            self.thread.join(30)
            assert not self.thread.is_alive(), self.log()
        for api in (self.rome_api, self.milan_api):
            api.client.close()

    def log(self) -> str:
        out, err = self.command.stdout._out, self.command.stderr._out
        return f"stdout:\n{out.getvalue()}\nstderr:\n{err.getvalue()}"

    def names(self, managed: ManagedCluster) -> set[str]:
        return set(Namespace.objects.filter(managed=managed).values_list("name", flat=True))

    def row(self, managed: ManagedCluster, name: str) -> Namespace | None:
        return Namespace.objects.filter(managed=managed, name=name).first()

    def until(self, predicate: Any, timeout: float, what: str) -> Any:
        """wait_until, failing with the watcher's output."""
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout}s waiting for {what}\n{self.log()}")
            time.sleep(0.1)
        return value

    def synced(self) -> None:
        """Wait until both writers have marked their cluster fresh (every kind listed and written)."""
        for managed in (self.rome, self.milan):
            self.until(lambda m=managed: SnapshotState.get(m).last_success_at, 60, f"{managed.name} synced")


def strategy_of(row: Namespace | None) -> str | None:
    return (row.offloading_spec or {}).get("podOffloadingStrategy") if row is not None and row.offloaded else None


@pytest.fixture
def two_clusters(
    tmp_path: Path, settings: Any, transactional_db: Any, fresh_clients: None, monkeypatch: Any
) -> Iterator[Fleet]:
    monkeypatch.setenv("LIQO_DASH_HEARTBEAT_DIR", str(tmp_path))  # the watcher's liveness file
    with Domain("domain:rome,milan", controller_delay=0.0, port=0) as dom:
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig")  # its current context: rome
        settings.LIQO_DASH = {
            **settings.LIQO_DASH,
            "KUBECONFIG": str(kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
            "LEADER_ELECTION": True,
            "LEADER_LEASE_SECONDS": 6,
            "LEADER_LEASE_NAMESPACE": LEASE_NAMESPACE,
            "WATCH_HEARTBEAT": 1.0,  # the writer wakes every second: its informer flag lasts three
        }
        settings.LIQO_DASH_CLUSTERS = []
        kube.reset_client()
        running = Fleet(dom, kubeconfig)
        try:
            yield running
        finally:
            running.stop()
            kube.reset_client()


@pytest.mark.django_db(transaction=True)
def test_a_managed_clusters_watch_failure_marks_only_its_own_snapshot() -> None:
    (rome,) = ensure_configured([])
    milan = ManagedCluster.objects.create(name=MILAN, context="milan")
    SnapshotState.touch(rome, last_success_at=timezone.now(), last_error="")
    snapshot.informer_alive(60)  # the default cluster's watcher keeps its snapshot
    snapshot.informer_alive(60, milan)
    SnapshotWriter(threading.Event(), background=False, managed=milan).failed("milan: connection refused")
    assert snapshot.watcher_keeps_snapshot() and not snapshot.watcher_keeps_snapshot(milan)
    assert snapshot.watcher_keeps_snapshot(rome.pk)  # the default named by its key is the same cluster
    assert SnapshotState.get(milan).last_error == "milan: connection refused" and SnapshotState.get(milan).is_stale()
    assert SnapshotState.get(rome).last_error == "" and not SnapshotState.get(rome).is_stale()
    assert cache.get("liqo-dash:informer-alive") == 1  # the default's key is the one of single-cluster versions


def test_each_clusters_rows_land_under_its_own_managed_cluster_and_nothing_crosses(two_clusters: Fleet) -> None:
    two_clusters.start()
    two_clusters.synced()
    rome, milan = two_clusters.rome, two_clusters.milan
    # Both clusters' namespaces, each set as that cluster's own API lists it.
    two_clusters.until(
        lambda: two_clusters.names(milan) == two_clusters.milan_api.namespaces(), 20, "milan's namespaces"
    )
    two_clusters.until(lambda: two_clusters.names(rome) == two_clusters.rome_api.namespaces(), 20, "rome's namespaces")
    assert two_clusters.names(rome) != two_clusters.names(milan)
    assert (
        set(Cluster.objects.filter(managed=milan).values_list("cluster_id", flat=True))
        == two_clusters.milan_api.peers()
    )
    assert (
        set(Cluster.objects.filter(managed=rome).values_list("cluster_id", flat=True)) == two_clusters.rome_api.peers()
    )

    # The same namespace in both clusters, offloaded differently; one only in milan.
    for api, strategy in ((two_clusters.rome_api, "LocalAndRemote"), (two_clusters.milan_api, "Remote")):
        api.namespace("orders")
        api.offload("orders", strategy)
    two_clusters.milan_api.namespace("only-milan")
    two_clusters.milan_api.offload("only-milan", "Local")
    two_clusters.until(lambda: strategy_of(two_clusters.row(milan, "orders")) == "Remote", 20, "milan's orders")
    two_clusters.until(lambda: strategy_of(two_clusters.row(rome, "orders")) == "LocalAndRemote", 20, "rome's orders")
    two_clusters.until(lambda: strategy_of(two_clusters.row(milan, "only-milan")) == "Local", 20, "milan's only-milan")
    assert two_clusters.row(rome, "only-milan") is None

    two_clusters.milan_api.restrategy("orders", "Local")  # modified in milan only
    two_clusters.until(lambda: strategy_of(two_clusters.row(milan, "orders")) == "Local", 20, "milan's orders modified")
    time.sleep(1.0)  # rome's writer would have had every chance to write it
    assert strategy_of(two_clusters.row(rome, "orders")) == "LocalAndRemote"
    for managed in (rome, milan):
        mine = ClusterOffloading.objects.filter(namespace__managed=managed)
        assert mine.exists() and not mine.exclude(managed=managed).exists()  # each row with its namespace's cluster

    # Drift is audited for every cluster, each event under its own: rome's offloading, created outside the
    # dashboard, is rome's drift; milan's create and update of its "orders", and its "only-milan", milan's.
    def drifted_to(managed: ManagedCluster, namespace: str = "orders") -> list[str | None]:
        found = AuditEvent.objects.filter(managed=managed, namespace=namespace, action__startswith="drift_")
        return [(event.after or {}).get("podOffloadingStrategy") for event in found.order_by("seq")]

    two_clusters.until(lambda: "LocalAndRemote" in drifted_to(rome), 10, "rome's drift")
    two_clusters.until(lambda: drifted_to(milan) == ["Remote", "Local"], 10, "milan's drift, created then updated")
    assert drifted_to(rome) == ["LocalAndRemote"]
    assert drifted_to(milan, "only-milan") == ["Local"] and drifted_to(rome, "only-milan") == []
    assert verify().ok  # sealed with their cluster
    assert snapshot.watcher_keeps_snapshot(rome) and snapshot.watcher_keeps_snapshot(milan)


def test_one_clusters_outage_marks_only_its_snapshot_while_the_default_keeps_updating(two_clusters: Fleet) -> None:
    two_clusters.start()
    two_clusters.synced()
    rome, milan = two_clusters.rome, two_clusters.milan
    two_clusters.domain["milan"].stop()  # milan's API server is gone
    two_clusters.until(lambda: SnapshotState.get(milan).last_error, 20, "milan's error on its own state")
    assert SnapshotState.get(milan).is_stale() and not snapshot.watcher_keeps_snapshot(milan)

    stopped = timezone.now()
    two_clusters.rome_api.namespace("after-milan-went")
    two_clusters.until(lambda: two_clusters.row(rome, "after-milan-went"), 20, "rome's new namespace")
    two_clusters.until(
        lambda: SnapshotState.get(rome).last_success_at > stopped, 10, "rome's heartbeat after milan's outage"
    )
    for _ in range(5):  # over several heartbeats of both
        state = SnapshotState.get(rome)
        assert state.last_error == "" and not state.is_stale(), state.last_error
        assert snapshot.watcher_keeps_snapshot(rome)
        time.sleep(0.5)
    assert breaker.outage() is None  # milan's outage is not the process's own API server's
    assert SnapshotState.get(milan).last_error and two_clusters.row(milan, "after-milan-went") is None


def _steal(name: str) -> None:
    """Make another replica hold the lease ``name`` (for an hour), as if it had taken it over."""
    for _ in range(20):
        lease = kube.get_lease(LEASE_NAMESPACE, name)
        assert lease is not None
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease["spec"].update(holderIdentity="thief", leaseDurationSeconds=3600, acquireTime=now, renewTime=now)
        try:
            kube.replace_lease(LEASE_NAMESPACE, lease)
            return
        except kube.KubeError as exc:
            if exc.kind != "conflict":  # the watcher renewed it meanwhile: read it again
                raise
    pytest.fail(f"could not take the lease {name}")


def test_a_lost_lease_stops_that_clusters_writer_and_only_that_one(two_clusters: Fleet, settings: Any) -> None:
    two_clusters.start()
    two_clusters.synced()
    rome, milan = two_clusters.rome, two_clusters.milan
    two_clusters.milan_api.namespace("before-the-loss")
    two_clusters.until(lambda: two_clusters.row(milan, "before-the-loss"), 20, "milan's namespace written")
    writer = two_clusters.command.running[MILAN][1][0].writer
    assert writer.is_alive() and writer.managed == milan

    _steal(cluster_lease_name(settings.LIQO_DASH["LEADER_LEASE_NAME"], MILAN, two_clusters.command.shares.default))
    two_clusters.until(lambda: MILAN not in two_clusters.command.running, 15, "milan's engine stopped")
    two_clusters.until(lambda: not writer.is_alive(), 6, "milan's writer ended (joined before its lease is let go)")
    two_clusters.until(lambda: f"cluster {MILAN}: lost the lease" in two_clusters.log(), 5, "the stop's end")
    assert not snapshot.watcher_keeps_snapshot(milan)  # its flag dropped with it: the worker may refresh it

    two_clusters.milan_api.namespace("after-the-loss")
    two_clusters.rome_api.namespace("rome-after-the-loss")
    two_clusters.until(lambda: two_clusters.row(rome, "rome-after-the-loss"), 20, "rome still written")
    time.sleep(2.0)
    assert two_clusters.row(milan, "after-the-loss") is None, "milan written after its lease was lost"
    assert rome.name in two_clusters.command.running and snapshot.watcher_keeps_snapshot(rome)


def test_the_refresh_of_a_managed_cluster_reads_its_api_under_its_own_lock(two_clusters: Fleet) -> None:
    rome, milan = two_clusters.rome, two_clusters.milan
    cache.add("liqo-dash:refresh-lock", "another worker", timeout=60)  # rome's refresh runs elsewhere
    report = snapshot.refresh_once(milan.pk)
    assert report is not None and report.ok, report
    assert two_clusters.names(milan) == two_clusters.milan_api.namespaces() and not two_clusters.names(rome)
    assert (
        set(Cluster.objects.filter(managed=milan).values_list("cluster_id", flat=True))
        == two_clusters.milan_api.peers()
    )
    assert snapshot.refresh_once() is None  # rome's own lock still held: queued behind it
    cache.delete("liqo-dash:refresh-lock")

    # Beat's periodic refresh: every managed cluster no watcher keeps, each judged alone.
    snapshot.informer_alive(60, milan)
    assert snapshot.refresh_unwatched() == [rome.name]
    assert two_clusters.names(rome) == two_clusters.rome_api.namespaces()
    milan_refreshed = SnapshotState.get(milan).last_success_at
    snapshot.informer_alive(None, milan)
    snapshot.informer_alive(60)
    two_clusters.milan_api.namespace("found-by-beat")
    assert snapshot.refresh_unwatched() == [MILAN]
    assert two_clusters.row(milan, "found-by-beat") is not None and two_clusters.row(rome, "found-by-beat") is None
    assert SnapshotState.get(milan).last_success_at > milan_refreshed

    two_clusters.domain["milan"].stop()
    report = snapshot.refresh_once(milan.pk)
    assert report is not None and not report.ok
    assert SnapshotState.get(milan).last_error and SnapshotState.get(rome).last_error == ""


def test_a_cluster_whose_connection_details_change_is_watched_again_on_the_new_ones(
    two_clusters: Fleet, monkeypatch: Any
) -> None:
    monkeypatch.setattr(watch_cluster, "CLUSTERS_EVERY", 0.5)  # the rows read twice a second
    two_clusters.start()
    two_clusters.synced()
    milan = two_clusters.milan
    two_clusters.until(lambda: two_clusters.names(milan) == two_clusters.milan_api.namespaces(), 20, "milan's rows")
    before = two_clusters.command.running[MILAN][1][0].writer
    ManagedCluster.objects.filter(pk=milan.pk).update(context="rome")  # an admin points it elsewhere
    two_clusters.until(
        lambda: two_clusters.names(milan) == two_clusters.rome_api.namespaces(), 30, "milan-eu's rows from rome"
    )
    assert not before.is_alive() and "connection details changed" in two_clusters.log()


@pytest.mark.django_db(transaction=True)
def test_beats_refresh_on_a_database_without_managed_clusters_asks_for_the_default(monkeypatch: Any) -> None:
    """A database no page or watcher has configured yet (a fresh install, a flushed test database): the
    periodic refresh makes the default cluster's row and asks for its refresh (it asked for nothing)."""
    ManagedCluster.objects.all().delete()
    asked: list[Any] = []
    monkeypatch.setattr(snapshot, "enqueue_refresh", lambda countdown=0, managed=None: asked.append(managed))
    names = snapshot.refresh_unwatched()
    default = ManagedCluster.objects.get(is_default=True)
    assert names == [default.name] and len(asked) == 1
