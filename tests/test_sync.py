"""The informer-style sync: the watcher lists every kind once, then follows watches; the snapshot
converges after a cold start, live changes, dropped connections, expired resource versions (410) and
a restart of the API server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from liqo_rules import constants as liqo
from offloading.cluster import kube
from offloading.models import Cluster, Namespace, SnapshotState, VirtualNode
from offloading.snapshot import informer
from offloading.snapshot.engine import KindWatcher, SnapshotWriter, all_synced
from offloading.snapshot.refresh import informer_alive, trigger_refresh
from sandbox import Sandbox
from sandbox.kinds import FOREIGN_CLUSTERS, NAMESPACE_OFFLOADINGS, NAMESPACES, VIRTUAL_NODES
from tests.fixtures.waits import free_port, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
GROUP, VERSION, PLURAL = "offloading.liqo.io", "v1beta1", "namespaceoffloadings"


class Informer:
    def __init__(self) -> None:
        informer.reset()
        self.stop = threading.Event()
        self.watchers: list[KindWatcher] = []
        self.writer = SnapshotWriter(self.stop, healthy=lambda: all_synced(self.writer, self.watchers))
        self.watchers += [KindWatcher(kind, self.stop, 5, self.writer) for kind in kube.WATCHED_KINDS]
        self.writer.start()
        for watcher in self.watchers:
            watcher.start()

    def lists(self) -> int:
        return sum(w.lists for w in self.watchers)

    def close(self) -> None:
        self.stop.set()
        for thread in [*self.watchers, self.writer]:
            thread.join(15)
            assert not thread.is_alive()
        informer_alive(None)


def _point_at(sb: Sandbox, tmp_path: Path, settings: Any) -> None:
    kubeconfig = sb.write_kubeconfig(tmp_path / "kubeconfig")
    settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
    kube.reset_client()


@pytest.fixture
def fleet(tmp_path: Path, settings: Any) -> Iterator[Sandbox]:
    with Sandbox(scenario="demo", controller_delay=0.0, port=0, bookmark_interval=1.0) as sb:
        _point_at(sb, tmp_path, settings)
        yield sb
    kube.reset_client()


@pytest.fixture
def synced(fleet: Sandbox) -> Iterator[Informer]:
    running = Informer()
    wait_until(lambda: _converged(fleet) == "", 30, message="the cold sync")
    yield running
    running.close()


def _converged(sb: Sandbox) -> str:
    """What differs between the cluster and the snapshot ('' when nothing)."""
    truth_ns = {o["metadata"]["name"] for o in sb.store.items(NAMESPACES)}
    if set(Namespace.objects.values_list("name", flat=True)) != truth_ns:
        return "namespaces"
    offloadings = {
        o["metadata"]["namespace"]: o
        for o in sb.store.items(NAMESPACE_OFFLOADINGS)
        if o["metadata"]["name"] == liqo.OFFLOADING_NAME
    }
    snapshot = dict(Namespace.objects.filter(offloaded=True).values_list("name", "offloading_resource_version"))
    if snapshot != {ns: o["metadata"]["resourceVersion"] for ns, o in offloadings.items()}:
        return "offloadings"
    clusters = {(o.get("spec") or {}).get("clusterID"): o for o in sb.store.items(FOREIGN_CLUSTERS)}
    rows = dict(Cluster.objects.values_list("cluster_id", "resource_version"))
    if rows != {cid: o["metadata"]["resourceVersion"] for cid, o in clusters.items()}:
        return "clusters"
    if VirtualNode.objects.count() != len(sb.store.items(VIRTUAL_NODES)):
        return "virtual nodes"
    return ""


def _offload(sb: Sandbox, namespace: str) -> None:
    sb.server.create(NAMESPACES, "", {"metadata": {"name": namespace}}, manager="kubectl")
    sb.server.create(
        NAMESPACE_OFFLOADINGS,
        namespace,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {"podOffloadingStrategy": "Remote"},
        },
        manager="liqoctl",
    )


def test_a_cold_sync_lists_each_kind_once_and_marks_the_snapshot_fresh(fleet: Sandbox, synced: Informer) -> None:
    assert [w.lists for w in synced.watchers] == [1] * len(kube.WATCHED_KINDS)
    assert Namespace.objects.filter(offloaded=True).exists()
    assert Cluster.objects.exists() and VirtualNode.objects.exists()
    state = wait_until(lambda: SnapshotState.objects.filter(last_success_at__isnull=False).first(), 60)
    assert state.last_error == ""


def test_live_changes_reach_the_snapshot_without_listing_again(fleet: Sandbox, synced: Informer) -> None:
    _offload(fleet, "live")
    wait_until(lambda: Namespace.objects.filter(name="live", offloaded=True).exists(), 60)
    wait_until(lambda: _converged(fleet) == "", 60, message="the status the controller wrote")
    fleet.faults.set(peer_down=["milan"])
    wait_until(lambda: Cluster.objects.get(cluster_id="milan").offloading_status != "Healthy", 60, message="peer")
    fleet.faults.set(peer_down=[])
    fleet.server.delete(NAMESPACES, "", "live")
    wait_until(lambda: _converged(fleet) == "", 30, message="convergence after the changes")
    assert synced.lists() == len(kube.WATCHED_KINDS)


def test_dropped_connections_resume_from_the_last_version(fleet: Sandbox, synced: Informer) -> None:
    fleet.faults.set(outage=True)  # every open watch ends and new requests are dropped
    try:
        wait_until(lambda: not all(w.healthy for w in synced.watchers), 60, message="the watches to fail")
        _offload(fleet, "during-outage")  # written behind the API's back while nobody can watch
    finally:
        fleet.faults.clear()
    wait_until(lambda: Namespace.objects.filter(name="during-outage", offloaded=True).exists(), 30)
    wait_until(lambda: _converged(fleet) == "", 30)
    assert synced.lists() == len(kube.WATCHED_KINDS)  # resumed: no relist


def test_an_expired_version_relists_and_converges(fleet: Sandbox, synced: Informer) -> None:
    fleet.faults.set(outage=True)  # the open watches end; nobody reconnects until it is over
    try:
        wait_until(lambda: not all(w.healthy for w in synced.watchers), 60, message="the watches to fail")
        _offload(fleet, "after-compaction")
        fleet.server.delete(NAMESPACES, "", "default")
        fleet.compact()  # history before now is gone: watching from the old versions answers 410 Gone
    finally:
        fleet.faults.clear()
    wait_until(lambda: _converged(fleet) == "", 30, message="convergence after 410")
    assert synced.lists() > len(kube.WATCHED_KINDS)


def test_a_restarted_api_server_is_followed_again(tmp_path: Path, settings: Any) -> None:
    port, state = free_port(), tmp_path / "state.json"
    sb = Sandbox(scenario="demo", port=port, state_file=state, bookmark_interval=1.0).start()
    running = None
    try:
        _point_at(sb, tmp_path, settings)
        running = Informer()
        wait_until(lambda: _converged(sb) == "", 30, message="the cold sync")
        sb.stop()
        sb = Sandbox(scenario="demo", port=port, state_file=state, bookmark_interval=1.0).start()
        _offload(sb, "after-restart")
        wait_until(lambda: _converged(sb) == "", 40, message="convergence after the restart")
    finally:
        if running is not None:
            running.close()
        sb.stop()


def test_no_full_refresh_runs_while_the_watcher_keeps_the_snapshot(fleet: Sandbox, synced: Informer) -> None:
    from django.core.cache import cache

    wait_until(lambda: cache.get("liqo-dash:informer-alive"), 60, message="the writer's heartbeat")
    trigger_refresh()  # what an applied change asks for (Celery runs eagerly in the tests)
    assert SnapshotState.get().last_list_calls == 0
    synced.close()
    trigger_refresh()
    assert SnapshotState.get().last_list_calls > 0  # without the watcher, the full refresh runs


def test_offloading_pages_shrink_as_the_peers_grow() -> None:
    """Each NamespaceOffloading carries two conditions per peer: pages stay near 3 MB (one is held)."""
    from offloading.snapshot.offloadings import offloading_page_size

    assert offloading_page_size(5) == offloading_page_size(200) == 50
    assert offloading_page_size(1000) == 10
    assert offloading_page_size(100_000) == 5


def test_the_snapshot_is_fresh_only_once_every_first_list_is_written() -> None:
    """A watcher is healthy as soon as its last page is queued; the snapshot waits for the writer to
    commit every kind's list (the bench once counted 1,952 of 1,988 pods at the moment it turned fresh)."""
    informer.reset()
    stop = threading.Event()
    writer = SnapshotWriter(stop)
    watchers = [KindWatcher(kind, stop, 5, writer) for kind in kube.WATCHED_KINDS]
    assert not all_synced(writer, [])
    for watcher in watchers:
        watcher.healthy = True
    assert not all_synced(writer, watchers)  # every list queued, none written
    for watcher in watchers[:-1]:
        writer.listed[watcher.kind].set()
    assert not all_synced(writer, watchers)  # one kind's pages still wait for the writer
    writer.listed[watchers[-1].kind].set()
    assert all_synced(writer, watchers)
    watchers[0].healthy = False  # a watch that failed since
    assert not all_synced(writer, watchers)
