"""Keep the snapshot like an informer: one paginated LIST per kind at start, then a WATCH from the
list's resourceVersion with bookmarks, resumed from the last version seen after a dropped connection.
A full relist happens only at start, after 410 Gone and every RESYNC_INTERVAL seconds (rare). Events go
through one writer thread that writes each batch in one transaction, only for objects that changed
(offloading.snapshot.informer says what each kind writes). Only the leader watches and writes.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, transaction
from django.utils import timezone

from offloading.cluster import breaker as apihealth
from offloading.cluster import kube
from offloading.models import SnapshotState
from offloading.models.fleet import ManagedRef, is_default, managed_pk
from offloading.snapshot import informer
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers pods and events
from offloading.snapshot import liqo_resources as _liqoresources  # noqa: F401 - slices, tenants, quotas, version
from offloading.snapshot import namespacemaps_watch as _namespacemap_watch  # noqa: F401 - registers NamespaceMaps
from offloading.snapshot.refresh import informer_alive

log = logging.getLogger("offloading.watch")


_RESTARTS = "liqo-dash:watch-restarts:"
# Items per LIST page of a relist: each kind's page_size() (50; NamespaceOffloadings fewer as the peers
# grow, about 3 MB a page); with the writer's bounded queue, memory stays flat whatever the fleet.


def _restart_key(kind: str, managed: ManagedRef) -> str:
    """The counter of ``kind``'s restarts in ``managed``: the default cluster keeps the single-cluster key."""
    return _RESTARTS + kind if is_default(managed) else f"{_RESTARTS}{kind}:{managed_pk(managed)}"


def _count_restart(kind: str, managed: ManagedRef = None) -> None:
    """Count a failed or relisted watch of ``managed`` (None: the default cluster) in the shared cache, for
    /metrics (the watcher has no HTTP port)."""
    key = _restart_key(kind, managed)
    cache.add(key, 0, timeout=None)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=None)


def watch_restarts(managed: ManagedRef = None) -> dict[str, int]:
    """How often each kind's watch of ``managed`` failed or had to list again, across watcher processes."""
    keys = {_restart_key(kind, managed): kind for kind in kube.WATCHED_KINDS}
    return {keys[key]: int(value) for key, value in cache.get_many(list(keys)).items()}


class SnapshotWriter(threading.Thread):
    """Applies what the watchers saw, in batches (one transaction each), in the order they saw it.

    With ``background=False`` nothing is queued: each item is written at once by the caller. While
    every kind is synced (``healthy``) it marks the snapshot fresh every WATCH_HEARTBEAT seconds.
    It writes the snapshot of ``managed`` (None: the default cluster, through ``informer.SYNCED``;
    another cluster gets its own set of kinds, ``informer.build``), and marks only that cluster fresh,
    watched (``refresh.informer_alive``) or failed."""

    BATCH = 500
    LINGER = 0.05
    PAGES_IN_FLIGHT = 1

    def __init__(
        self,
        stop: threading.Event,
        healthy: Callable[[], bool] = lambda: True,
        background: bool = True,
        managed: ManagedRef = None,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        """``may_write``: whether this process still holds the cluster's lease (a renewal within its renew
        deadline). A batch waits for it before it is written, so that a process that stalled past its
        lease (paused, starved, its lease rounds slow) writes nothing once another may have taken over;
        the batch is dropped when the writer stops (the lease was lost: the new holder lists anew)."""
        label = "" if managed is None else f"-{getattr(managed, 'name', managed)}"
        super().__init__(name=f"snapshot-writer{label}", daemon=True)
        self.managed = managed
        self.may_write = may_write
        self.synced = informer.SYNCED if managed is None else informer.build(managed)
        self.stop_event = stop
        self.healthy = healthy
        self.background = background
        self.queue: queue.Queue[tuple[str, str, Any]] = queue.Queue(maxsize=16)
        self.written = 0
        self._beat = 0.0
        self.heartbeat_every = float(settings.LIQO_DASH["WATCH_HEARTBEAT"])
        self._pages = threading.Semaphore(self.PAGES_IN_FLIGHT)  # relist pages queued, not yet written
        self.listed: dict[str, threading.Event] = {kind: threading.Event() for kind in self.synced}

    def event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        self._put((kind, event_type, obj))

    def page(self, kind: str, items: list[dict[str, Any]]) -> None:
        if self.background:
            while not self._pages.acquire(timeout=1.0):  # one page in memory at a time, whatever the kinds
                if self.stop_event.is_set():
                    return
        self._put((kind, "PAGE", items))

    def relisted(self, kind: str, seen: set[str]) -> None:
        self._put((kind, "RELISTED", seen))

    def _put(self, item: tuple[str, str, Any]) -> None:
        if not self.background:
            self._apply([item])
            return
        while not self.stop_event.is_set():
            try:
                self.queue.put(item, timeout=1.0)  # bounded: a relist waits for the writer (memory stays flat)
                return
            except queue.Full:
                continue

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                batch = [self.queue.get(timeout=1.0)]
            except queue.Empty:
                self.heartbeat()
                continue
            # What comes within LINGER joins the batch: on SQLite every transaction takes the one write
            # lock the worker's pushes wait for, and a burst of events (a bulk: four per offloading) is
            # far fewer transactions this way, for a status at most LINGER later.
            until = time.monotonic() + self.LINGER
            while len(batch) < self.BATCH:
                try:
                    batch.append(self.queue.get(timeout=max(0.0, until - time.monotonic())))
                except queue.Empty:
                    break
            while not self.may_write():
                if self.stop_event.wait(0.1):
                    self._release_pages(batch)
                    return
            self._apply(batch)
            self.heartbeat()

    def _apply(self, batch: list[tuple[str, str, Any]]) -> None:
        now = timezone.now()
        try:
            SnapshotState.get(self.managed)
            with transaction.atomic():
                events: list[tuple[str, dict[str, Any]]] = []
                for i, (kind, what, payload) in enumerate(batch):
                    sync = self.synced[kind]
                    if what == "PAGE":
                        sync.apply([("ADDED", obj) for obj in payload], now, relist=True)
                    elif what == "RELISTED":
                        sync.relisted(payload, now)
                        transaction.on_commit(self.listed[kind].set)
                    else:
                        events.append((what, payload))
                        following = batch[i + 1] if i + 1 < len(batch) else None
                        if following is None or following[0] != kind or following[1] in ("PAGE", "RELISTED"):
                            sync.apply(events, now)
                            events = []
            self.written += len(batch)
        except Exception:  # noqa: BLE001 - the writer outlives a bad batch; a resync repairs the rows
            log.exception("snapshot writer: a batch of %d failed", len(batch))
        finally:
            self._release_pages(batch)
            close_old_connections()

    def _release_pages(self, batch: list[tuple[str, str, Any]]) -> None:
        if self.background:
            for _ in range(sum(1 for _, what, _ in batch if what == "PAGE")):
                self._pages.release()

    def heartbeat(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._beat < self.heartbeat_every:
            return
        if self.healthy() and self.may_write():
            self._beat = time.monotonic()
            try:
                informer_alive(3 * self.heartbeat_every, self.managed)
                now = timezone.now()
                SnapshotState.touch(self.managed, last_success_at=now, last_attempt_at=now, last_error="")
            except Exception:  # noqa: BLE001 - Redis or the database away: the writer lives on, the next beat tries
                log.warning("the snapshot's heartbeat failed; the next one tries again", exc_info=True)
            finally:
                close_old_connections()

    def failed(self, message: str) -> None:
        """A watch of this writer's cluster failed: its snapshot (only its own) is no longer kept. Noted
        only while this replica holds the cluster's lease: after, the state and flag are the new holder's."""
        if not self.may_write():
            return
        informer_alive(None, self.managed)
        SnapshotState.touch(self.managed, last_attempt_at=timezone.now(), last_error=message)
        close_old_connections()


def all_synced(writer: SnapshotWriter, watchers: list[KindWatcher]) -> bool:
    """Every kind is watched and its first list is written, not only queued: a cold sync's last pages
    may still wait for the writer, and the snapshot must not be called fresh before they are rows."""
    return bool(watchers) and all(w.healthy and writer.listed[w.kind].is_set() for w in watchers)


class KindWatcher(threading.Thread):
    """One kind, forever (until ``stop`` is set): LIST (streamed, page by page), then WATCH."""

    def __init__(
        self,
        kind: str,
        stop: threading.Event,
        timeout_seconds: int,
        writer: SnapshotWriter | None = None,
        resync_seconds: float | None = None,
        api: Any = None,
    ) -> None:
        """``api``: the client of the cluster whose ``writer`` this feeds (a managed cluster's kubernetes
        ApiClient); None for the process's own cluster, the only one whose failures and recoveries are
        the API server's health (offloading.cluster.breaker): another cluster's outage must not stop
        the process's own changes."""
        super().__init__(name=f"watch-{kind}", daemon=True)
        self.api = api
        self.kind = kind
        self.stop_event = stop
        self.timeout_seconds = timeout_seconds
        self.writer = writer or SnapshotWriter(stop, background=False)
        self.resync_seconds = float(
            resync_seconds if resync_seconds is not None else settings.LIQO_DASH["RESYNC_INTERVAL"]
        )
        self.resource_version = ""
        self.events = 0
        self.lists = 0  # how often the kind was listed (start, 410 Gone, resync)
        self.listed_at = 0.0
        self.healthy = False

    def relist(self) -> str:
        sync = self.writer.synced[self.kind]
        for kind in sync.after:  # e.g. offloadings once their namespaces are rows (else they wait in memory)
            ready = self.writer.listed.get(kind)
            while self.writer.background and ready is not None and not ready.wait(1.0):
                if self.stop_event.is_set():
                    return ""
        seen: set[str] = set()
        version = ""
        for items, page_version in kube.list_pages(self.kind, sync.page_size(), self.api):
            seen.update(sync.key(obj) for obj in items)
            self.writer.page(self.kind, items)
            version = page_version
        self.writer.relisted(self.kind, seen)
        return version

    def run(self) -> None:
        failures = 0
        while not self.stop_event.is_set():
            try:
                if not self.resource_version or time.monotonic() - self.listed_at > self.resync_seconds:
                    self.resource_version = ""
                    self.lists += 1
                    if self.lists > 1:
                        _count_restart(self.kind, self.writer.managed)
                    self.resource_version = self.relist()
                    self.listed_at = time.monotonic()
                    self.healthy = True
                    if self.api is None and apihealth.report_success():
                        apihealth.resume_waiting()
                left = self.resync_seconds - (time.monotonic() - self.listed_at)
                timeout = max(1, min(self.timeout_seconds, int(left) + 1))
                for event_type, obj in kube.watch(self.kind, self.resource_version, timeout, self.api):
                    failures = 0
                    self.healthy = True
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if version:
                        self.resource_version = version
                    if event_type != "BOOKMARK":
                        self.events += 1
                        self.writer.event(self.kind, event_type, obj)
                    if self.stop_event.is_set():
                        return
            except kube.KubeError as exc:
                if self.stop_event.is_set():
                    # Stopped (its lease lost or released): the stream it was reading broke, which says
                    # nothing of the cluster; the snapshot is now the new holder's to mark.
                    return
                if exc.kind == "gone":
                    log.info("watch %s: resourceVersion %s expired, listing again", self.kind, self.resource_version)
                    self.resource_version = ""
                    continue
                failures += 1
                self.healthy = False
                _count_restart(self.kind, self.writer.managed)
                if exc.unreachable and self.api is None:
                    apihealth.report_failure(exc)
                self.writer.failed(exc.message)
                # Capped low: after an outage the snapshot must follow the cluster again within seconds.
                delay = min(5.0, 0.5 * 2**failures) * random.uniform(0.5, 1.5)
                log.warning("watch %s failed (%s); retrying in %.1fs", self.kind, exc.message, delay)
                self.stop_event.wait(delay)
            except Exception:  # noqa: BLE001 - a watcher must outlive one bad event
                log.exception("watch %s: unexpected error", self.kind)
                self.stop_event.wait(2.0)
            finally:
                close_old_connections()
