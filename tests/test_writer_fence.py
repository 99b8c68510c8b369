"""The snapshot writer writes only while its process holds the cluster's lease (SnapshotWriter's
``may_write``, the watcher's lease rounds): a batch waits for a fresh renewal, and is dropped when the
writer stops (the lease was lost; the new holder lists anew)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from offloading.cluster.managed import connection_fingerprint
from offloading.management.commands.watch_cluster import Command
from offloading.models import ManagedCluster, Namespace, SnapshotState
from offloading.snapshot import engine
from offloading.snapshot.engine import SnapshotWriter


def _namespace(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": {}}, "status": {"phase": "Active"}}


def _wait(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.django_db(transaction=True)  # the writer's own thread and connection
def test_a_batch_waits_for_the_lease_and_is_dropped_when_the_writer_stops() -> None:
    holds = threading.Event()
    stop = threading.Event()
    writer = SnapshotWriter(stop, may_write=holds.is_set)
    writer.start()
    try:
        writer.event("namespaces", "ADDED", _namespace("shop"))
        time.sleep(0.6)  # several looks at the lease: not held, nothing written
        assert not Namespace.objects.filter(name="shop").exists()
        holds.set()  # the round renewed it
        assert _wait(lambda: Namespace.objects.filter(name="shop").exists())
        holds.clear()  # a stall past the renew deadline, then the lease is lost
        writer.event("namespaces", "ADDED", _namespace("late"))
        time.sleep(0.3)
        stop.set()
        writer.join(5)
        assert not writer.is_alive()
        assert not Namespace.objects.filter(name="late").exists()
    finally:
        stop.set()


@pytest.mark.django_db(transaction=True)  # the writer's own thread and connection
def test_a_failed_heartbeat_leaves_the_writer_writing(monkeypatch: Any) -> None:
    """Redis or the database away at a heartbeat: the writer logs it and goes on (a writer that died
    there left its cluster's lease renewed with nothing writing the snapshot)."""
    calls: list[int] = []

    def broken(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        raise ConnectionError("the cache did not answer")

    monkeypatch.setattr(engine, "informer_alive", broken)
    stop = threading.Event()
    writer = SnapshotWriter(stop, healthy=lambda: True)
    writer.heartbeat_every = 0.05
    writer.start()
    try:
        assert _wait(lambda: len(calls) >= 2), "the heartbeat was never tried again"
        assert writer.is_alive()
        writer.event("namespaces", "ADDED", _namespace("after-the-blip"))
        assert _wait(lambda: Namespace.objects.filter(name="after-the-blip").exists())
    finally:
        stop.set()
        writer.join(5)


@pytest.mark.django_db(transaction=True)  # failed() closes old connections, as in the writer's thread
def test_a_watch_failure_after_the_lease_is_lost_notes_nothing() -> None:
    """The stale holder's watch fails after another replica took the cluster: the snapshot state and the
    informer flag are the new holder's, and stay as they are."""
    SnapshotState.touch(None, last_error="")
    writer = SnapshotWriter(threading.Event(), may_write=lambda: False)
    writer.failed("the watch stream broke")
    assert SnapshotState.get().last_error == ""
    SnapshotWriter(threading.Event(), may_write=lambda: True).failed("the watch stream broke")
    assert SnapshotState.get().last_error == "the watch stream broke"


def test_a_cluster_made_again_under_its_name_is_watched_again() -> None:
    """A managed cluster removed and made again with the same name and connection details between two
    reads: its engine wrote under the old row's key, so it starts again on the new row."""
    old = ManagedCluster(pk=7, name="milan", context="milan")
    command = Command()
    command.engines = {"milan": (old, connection_fingerprint(old))}
    command.clusters = type("Rows", (), {"rows": {"milan": ManagedCluster(pk=7, name="milan", context="milan")}})()
    assert command._reconnected() == []
    command.clusters.rows["milan"] = ManagedCluster(pk=8, name="milan", context="milan")
    assert command._reconnected() == ["milan"]
