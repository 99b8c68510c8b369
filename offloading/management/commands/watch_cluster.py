"""``manage.py watch_cluster``: run the watcher engine (offloading.snapshot.engine) while this process
holds the leader lease."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from liqo_dash import heartbeat
from offloading.cluster import kube
from offloading.cluster.leader import LeaderElector
from offloading.snapshot import informer
from offloading.snapshot.engine import KindWatcher, SnapshotWriter, all_synced
from offloading.snapshot.refresh import informer_alive


class Command(BaseCommand):
    help = "Watch the Kubernetes API and keep the snapshot current within a second or two."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--timeout-seconds", type=int, default=300, help="Server-side timeout of each watch.")

    def handle(self, *args: Any, **options: Any) -> None:
        conf = settings.LIQO_DASH
        elector = None
        if conf["LEADER_ELECTION"]:
            identity = f"{socket.gethostname()}-{os.getpid()}"
            elector = LeaderElector(
                conf["LEADER_LEASE_NAME"], conf["LEADER_LEASE_NAMESPACE"], identity, int(conf["LEADER_LEASE_SECONDS"])
            )
            self.stdout.write(
                f"leader election: lease {conf['LEADER_LEASE_NAMESPACE']}/{conf['LEADER_LEASE_NAME']} as {identity}"
            )
        running: tuple[threading.Event, list[KindWatcher]] | None = None
        renew_every = max(1.0, int(conf["LEADER_LEASE_SECONDS"]) / 5)
        try:
            while True:
                leading = elector.try_acquire_or_renew() if elector is not None else True
                if leading and running is None:
                    running = self._start(options["timeout_seconds"])
                elif not leading and running is not None:
                    self._stop(running, "lost the lease: another watcher writes the snapshot")
                    running = None
                if running is not None and not any(w.is_alive() for w in running[1]):
                    return
                heartbeat.touch("watcher")  # every renewal, leading or standing by: the liveness probe reads it
                time.sleep(renew_every if elector is not None else 1.0)
        except KeyboardInterrupt:
            pass
        finally:
            if running is not None:
                self._stop(running, "stopping")

    def _start(self, timeout_seconds: int) -> tuple[threading.Event, list[KindWatcher]]:
        stop = threading.Event()
        informer.reset()  # a new term as leader starts from a fresh list of every kind
        watchers: list[KindWatcher] = []
        writer = SnapshotWriter(stop, healthy=lambda: all_synced(writer, watchers))
        watchers += [KindWatcher(kind, stop, timeout_seconds, writer) for kind in kube.WATCHED_KINDS]
        writer.start()
        for watcher in watchers:
            watcher.start()
        self.stdout.write(f"watching {', '.join(kube.WATCHED_KINDS)}")
        self.stdout.flush()
        return stop, watchers

    def _stop(self, running: tuple[threading.Event, list[KindWatcher]], why: str) -> None:
        stop, watchers = running
        stop.set()
        for watcher in watchers:
            watcher.join(5)
        informer_alive(None)  # the worker refreshes again when asked
        self.stdout.write(f"watchers stopped: {why}")
        self.stdout.flush()
