"""``manage.py watch_cluster``: run the watcher engine (offloading.snapshot.engine) for the managed
clusters this replica holds.

With LEADER_ELECTION on (the default), replicas share the managed clusters through one Lease per
cluster (offloading.cluster.shares; the default cluster's is the single leader lease of earlier
versions, so a single-cluster install is unchanged): every round this replica renews, takes and releases
leases, then starts what ``start_cluster`` runs for each cluster it won and stops it for each cluster it
released or lost. A clean stop (SIGINT, SIGTERM) releases every lease, so another replica takes over at
its next round. With LEADER_ELECTION off, the process watches the default cluster alone, as before.

Every held cluster gets the same engine (stage 2b of issue 28): a KindWatcher per kind and one
SnapshotWriter, on the cluster's own client (``offloading.cluster.managed.api_client_for``; the default
cluster keeps the process's own client and ``informer.SYNCED``), writing that cluster's rows only while
this replica's lease on it is fresh. What the engine keeps per process for "the" cluster is the default
cluster's alone (``informer.reset``, the API-health breaker, the watch-restart counts); what it shares
through the cache (``refresh.informer_alive``) is keyed per cluster, so one cluster's outage marks its
own snapshot stale and no other's. A cluster whose connection details change is started again on them.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from liqo_dash import heartbeat
from offloading.cluster import kube
from offloading.cluster.managed import api_client_for, connection_fingerprint
from offloading.cluster.shares import ClusterShares
from offloading.models.managed import ManagedCluster, ensure_configured
from offloading.snapshot import informer
from offloading.snapshot.engine import KindWatcher, SnapshotWriter, all_synced
from offloading.snapshot.refresh import informer_alive

# Seconds between two reads of the managed clusters.
CLUSTERS_EVERY = 5.0
# What runs for one held cluster: its stop event and its watcher threads.
Running = tuple[threading.Event, list[KindWatcher]]


class ManagedClusters(threading.Thread):
    """Reads the managed clusters (the rows of LIQO_DASH_CLUSTERS made first) every few seconds, so that a
    cluster an admin registers gets a lease, in its own thread: the lease loop must never wait on the
    database (a slow one would cost it every lease). ``latest`` is None until the first read; ``rows``
    holds the rows of that read by name (what a cluster's engine starts from, without a query)."""

    def __init__(self, stop: threading.Event, every: float, stderr: Any) -> None:
        super().__init__(name="managed-clusters", daemon=True)
        self.stop, self.every, self.stderr = stop, every, stderr
        self.latest: tuple[list[str], str] | None = None
        self.rows: dict[str, ManagedCluster] = {}

    def run(self) -> None:
        configured = False
        while not self.stop.is_set():
            try:
                if not configured:
                    ensure_configured()
                    configured = True
                rows = list(ManagedCluster.objects.all())
                self.rows = {row.name: row for row in rows}  # before latest: a held name has its row
                self.latest = ([row.name for row in rows], next((row.name for row in rows if row.is_default), ""))
            except DatabaseError as exc:
                self.stderr.write(f"cannot read the managed clusters: {exc}")
                close_old_connections()
            self.stop.wait(self.every)
        close_old_connections()


# Set by SIGTERM (a pod stopping): the lease loop ends at its next step, its leases released. A flag,
# not an exception raised wherever the loop happens to be (between winning a lease and noting it, or
# while starting a cluster's engine), which could leave a lease held or released under a running writer.
_terminating = threading.Event()


def _interrupt(signum: int, frame: Any) -> None:
    _terminating.set()


class Command(BaseCommand):
    help = "Watch the Kubernetes API and keep the snapshot current within a second or two."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--timeout-seconds", type=int, default=300, help="Server-side timeout of each watch.")

    def handle(self, *args: Any, **options: Any) -> None:
        self.timeout_seconds = int(options["timeout_seconds"])
        if settings.LIQO_DASH["LEADER_ELECTION"]:
            self._shared()
        else:
            self._alone()

    # -- no leader election: this process watches the default cluster ------------------------------
    def _alone(self) -> None:
        running: Running | None = None
        try:
            while True:
                if running is None:
                    running = self._start(self.timeout_seconds)
                if not any(w.is_alive() for w in running[1]):
                    return
                heartbeat.touch("watcher")  # the liveness probe reads it
                time.sleep(1.0)
        except KeyboardInterrupt:
            pass
        finally:
            if running is not None:
                self._stop(running, "stopping")

    # -- leader election: this replica's share of the managed clusters -----------------------------
    def _shared(self) -> None:
        conf = settings.LIQO_DASH
        identity = f"{socket.gethostname()}-{os.getpid()}"
        self.running: dict[str, Running] = {}
        # The row and connection fingerprint each running engine of a cluster other than the default was
        # started with: its snapshot's keys, and whether its connection details changed since.
        self.engines: dict[str, tuple[ManagedCluster, str]] = {}
        self.shares = ClusterShares(
            conf["LEADER_LEASE_NAME"],
            conf["LEADER_LEASE_NAMESPACE"],
            identity,
            int(conf["LEADER_LEASE_SECONDS"]),
            before_release=lambda name: self._stop_cluster(name, "released its lease to another watcher"),
        )
        self.stdout.write(
            f"leader election: lease {conf['LEADER_LEASE_NAMESPACE']}/{conf['LEADER_LEASE_NAME']} "
            f"(one per managed cluster) as {identity}"
        )
        self.stdout.flush()
        renew_every = max(1.0, int(conf["LEADER_LEASE_SECONDS"]) / 5)
        clusters = self.clusters = ManagedClusters(threading.Event(), CLUSTERS_EVERY, self.stderr)
        clusters.start()
        main = threading.current_thread() is threading.main_thread()  # signals can be set only there
        previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
        _terminating.clear()
        try:
            while not _terminating.is_set():
                if clusters.latest is not None:
                    self.shares.set_clusters(*clusters.latest)
                began = time.monotonic()
                held = self.shares.round().held
                took = time.monotonic() - began
                if took > renew_every:
                    self.stderr.write(f"a lease round took {took:.1f} s (a lease lasts {self.shares.lease_seconds} s)")
                lost = [name for name in self.running if name not in held]
                self._stopping(lost)
                for name in lost:
                    self._stop_cluster(name, "lost the lease: another watcher writes its snapshot")
                reconnected = self._reconnected()
                self._stopping(reconnected)
                for name in reconnected:
                    self._stop_cluster(name, "its connection details changed: watching it again on the new ones")
                for name in sorted(held - set(self.running)):
                    self.running[name] = self.start_cluster(name)
                engine = self.running.get(self.shares.default)
                if engine is not None and engine[1] and not any(w.is_alive() for w in engine[1]):
                    return
                heartbeat.touch("watcher")  # every round, holding clusters or standing by: the liveness probe
                _terminating.wait(renew_every)
        except KeyboardInterrupt:
            pass
        finally:
            self._stopping(list(self.running))
            for name in list(self.running):
                self._stop_cluster(name, "stopping")
            self.shares.release_all()
            clusters.stop.set()
            if main:
                signal.signal(signal.SIGTERM, previous)

    def start_cluster(self, cluster_name: str) -> Running:
        """Start what keeps ``cluster_name``'s snapshot, now that this replica holds its lease. Its writer
        writes only while this replica's lease is fresh (SnapshotWriter.may_write)."""
        may_write: Callable[[], bool] = lambda: self.shares.holds_now(cluster_name)  # noqa: E731
        if cluster_name == self.shares.default:
            return self._start(self.timeout_seconds, may_write=may_write)
        cluster = self.clusters.rows.get(cluster_name)
        if cluster is None:  # held names come from the rows read: removed between two reads
            return threading.Event(), []
        return self._start_managed(cluster, may_write)

    def _stop_cluster(self, cluster_name: str, why: str) -> bool:
        """Stop what writes ``cluster_name``'s snapshot; returns whether nothing writes it any more."""
        running = self.running.pop(cluster_name, None)
        if running is None:
            return True
        if cluster_name == self.shares.default:
            return self._stop(running, why)
        engine = self.engines.pop(cluster_name, None)
        if engine is None:  # nothing ran for it (its row was gone when its lease was won)
            running[0].set()
            return True
        return self._stop(running, f"cluster {cluster_name}: {why}", engine[0])

    def _stopping(self, names: list[str]) -> None:
        """Tell the engines of ``names`` to stop, all at once, before each is waited for: their writers
        finish their batches together, and the lease loop waits about one batch, not one per cluster
        (several in a row could outlast the other leases' renewal)."""
        for name in names:
            running = self.running.get(name)
            if running is not None:
                running[0].set()

    def _reconnected(self) -> list[str]:
        """The clusters whose engine runs on connection details an admin has changed since it started, or
        on a row since removed and made again under the same name (its rows' key is the new row's)."""
        rows = self.clusters.rows
        return [
            name
            for name, (row, fingerprint) in self.engines.items()
            if name in rows and (rows[name].pk != row.pk or connection_fingerprint(rows[name]) != fingerprint)
        ]

    # -- the engine of a managed cluster other than the default -------------------------------------
    def _start_managed(self, cluster: ManagedCluster, may_write: Callable[[], bool]) -> Running:
        """The default's engine for another cluster: its own client, its own set of kinds (the writer's
        ``managed``), its own SnapshotState and informer key; its failures are not the API server's."""
        stop = threading.Event()
        watchers: list[KindWatcher] = []
        writer = SnapshotWriter(
            stop, healthy=lambda: all_synced(writer, watchers), managed=cluster, may_write=may_write
        )
        self.engines[cluster.name] = (cluster, connection_fingerprint(cluster))
        try:
            api = api_client_for(cluster)
        except kube.KubeError as exc:
            # No usable configuration (a context missing from the kubeconfig, credentials the key cannot
            # read): noted on the cluster's own state by a thread (the lease loop never waits on the
            # database); tried again when its connection details change or its lease moves.
            threading.Thread(target=writer.failed, args=(exc.message,), daemon=True).start()
            self.stderr.write(f"cluster {cluster.name}: {exc.message}")
            return stop, []
        watchers += [KindWatcher(kind, stop, self.timeout_seconds, writer, api=api) for kind in kube.WATCHED_KINDS]
        writer.start()
        for watcher in watchers:
            watcher.name = f"watch-{cluster.name}-{watcher.kind}"
            watcher.start()
        self.stdout.write(f"cluster {cluster.name}: watching {', '.join(kube.WATCHED_KINDS)}")
        self.stdout.flush()
        return stop, watchers

    # -- the engine of the default cluster ---------------------------------------------------------
    def _start(self, timeout_seconds: int, may_write: Callable[[], bool] = lambda: True) -> Running:
        stop = threading.Event()
        informer.reset()  # a new term as leader starts from a fresh list of every kind
        watchers: list[KindWatcher] = []
        writer = SnapshotWriter(stop, healthy=lambda: all_synced(writer, watchers), may_write=may_write)
        watchers += [KindWatcher(kind, stop, timeout_seconds, writer) for kind in kube.WATCHED_KINDS]
        writer.start()
        for watcher in watchers:
            watcher.start()
        self.stdout.write(f"watching {', '.join(kube.WATCHED_KINDS)}")
        self.stdout.flush()
        return stop, watchers

    def _stop(self, running: Running, why: str, managed: ManagedCluster | None = None) -> bool:
        """Stop the engine of ``managed`` (None: the default cluster); returns whether its writer has ended
        (nothing of it writes any more)."""
        stop, watchers = running
        stop.set()
        # The writer is what writes the snapshot: wait for it (it sees the stop within a second, after the
        # batch in hand), so that the lease is released only once nothing here writes. The watch threads
        # only feed it; they are daemons, and one in the middle of a watch stream ends with the stream:
        # the lease loop does not wait for them (it must renew the other leases in time).
        deadline = time.monotonic() + 5
        writers = {watcher.writer for watcher in watchers}
        for writer in writers:
            writer.join(max(0.0, deadline - time.monotonic()))
        deadline = min(deadline, time.monotonic() + 0.5)
        for watcher in watchers:
            watcher.join(max(0.0, deadline - time.monotonic()))
        informer_alive(None, managed)  # the worker refreshes that cluster again when asked
        ended = not any(writer.is_alive() for writer in writers)
        self.stdout.write(f"watchers stopped: {why}" + ("" if ended else " (its writer still finishes a batch)"))
        self.stdout.flush()
        return ended
