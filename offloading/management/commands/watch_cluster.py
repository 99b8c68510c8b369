"""Follow the cluster with watches so the snapshot changes within a second of the cluster.

NamespaceOffloading events are written into the snapshot directly; events on peers, virtual nodes,
their Nodes and namespaces ask for a (coalesced) full refresh. Each watch resumes from the last
resourceVersion it saw (bookmarks included) and starts over from a fresh list after 410 Gone. The
periodic refresh of beat stays the safety net.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from offloading import kube
from offloading.changes import apihealth
from offloading.changes.drift import observe_offloading
from offloading.changes.snapshot import trigger_refresh
from offloading.leader import LeaderElector
from offloading.liqo import constants as liqo

log = logging.getLogger("offloading.watch")


_RESTARTS = "liqo-dash:watch-restarts:"


def _count_restart(kind: str) -> None:
    """Count a failed or relisted watch in the shared cache, for /metrics (the watcher has no HTTP port)."""
    key = _RESTARTS + kind
    cache.add(key, 0, timeout=None)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=None)


def watch_restarts() -> dict[str, int]:
    """How often each kind's watch failed or had to list again, across watcher processes."""
    found = cache.get_many([_RESTARTS + kind for kind in kube.WATCHED_KINDS])
    return {key.removeprefix(_RESTARTS): int(value) for key, value in found.items()}


class KindWatcher(threading.Thread):
    """One watch loop for one kind, forever (until ``stop`` is set)."""

    def __init__(self, kind: str, stop: threading.Event, timeout_seconds: int) -> None:
        super().__init__(name=f"watch-{kind}", daemon=True)
        self.kind = kind
        self.stop_event = stop
        self.timeout_seconds = timeout_seconds
        self.resource_version = ""
        self.events = 0
        self.lists = 0  # how often the watch had to start over from a fresh list

    def run(self) -> None:
        failures = 0
        while not self.stop_event.is_set():
            try:
                if not self.resource_version:
                    self.resource_version = kube.current_resource_version(self.kind)
                    self.lists += 1
                    if self.lists > 1:
                        _count_restart(self.kind)
                    if apihealth.report_success():
                        apihealth.resume_waiting()
                    # Whatever happened before this version is only known from a full list.
                    trigger_refresh()
                for event_type, obj in kube.watch(self.kind, self.resource_version, self.timeout_seconds):
                    failures = 0
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if version:
                        self.resource_version = version
                    if event_type != "BOOKMARK":
                        self.events += 1
                        self.handle(event_type, obj)
                    if self.stop_event.is_set():
                        return
            except kube.KubeError as exc:
                if exc.kind == "gone":
                    log.info("watch %s: resourceVersion %s expired, listing again", self.kind, self.resource_version)
                    self.resource_version = ""
                    continue
                failures += 1
                _count_restart(self.kind)
                if exc.unreachable:
                    apihealth.report_failure(exc)
                # Capped low: after an outage the snapshot must follow the cluster again within seconds.
                delay = min(5.0, 0.5 * 2**failures) * random.uniform(0.5, 1.5)
                log.warning("watch %s failed (%s); retrying in %.1fs", self.kind, exc.message, delay)
                self.stop_event.wait(delay)
            except Exception:  # noqa: BLE001 - a watcher must outlive one bad event
                log.exception("watch %s: unexpected error", self.kind)
                self.stop_event.wait(2.0)
            finally:
                close_old_connections()

    def handle(self, event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if self.kind == "namespaceoffloadings":
            if meta.get("name") != liqo.OFFLOADING_NAME:
                return
            observed = None if event_type == "DELETED" else obj
            if observe_offloading(meta.get("namespace", ""), observed):
                return
        trigger_refresh()


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
                time.sleep(renew_every if elector is not None else 1.0)
        except KeyboardInterrupt:
            pass
        finally:
            if running is not None:
                self._stop(running, "stopping")

    def _start(self, timeout_seconds: int) -> tuple[threading.Event, list[KindWatcher]]:
        stop = threading.Event()
        watchers = [KindWatcher(kind, stop, timeout_seconds) for kind in kube.WATCHED_KINDS]
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
        self.stdout.write(f"watchers stopped: {why}")
        self.stdout.flush()
