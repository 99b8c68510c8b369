"""Watch fan-out: every open watch is a `Watcher` with its own queue, filled by the store (under its lock)
and drained by the HTTP thread that streams it; `WatchHub` keeps the open watches per kind and offers
each change to them."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from sandbox.history import Event
from sandbox.kinds import STORED_KINDS, Kind
from sandbox.objects import Obj


class Watcher:
    """One open watch: events are pushed by the store (under its lock) and pulled by the HTTP thread."""

    def __init__(self, kind: Kind, namespace: str | None, predicate: Callable[[Obj], bool]) -> None:
        self.kind = kind
        self.namespace = namespace
        self.predicate = predicate
        self.cond = threading.Condition()
        self.queue: collections.deque[tuple[str, Obj]] = collections.deque()
        self.closed = False

    def visible(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return False
        return self.predicate(obj)

    def translate(self, event: Event) -> tuple[str, Obj] | None:
        """Kubernetes' filtered-watch rule: an object entering the selection is ADDED, leaving it DELETED."""
        now = event.type != "DELETED" and self.visible(event.obj)
        before = self.visible(event.prev) if event.type != "ADDED" else False
        if event.type == "DELETED":
            return ("DELETED", event.obj) if self.visible(event.obj) else None
        if now and before:
            return ("MODIFIED", event.obj)
        if now:
            return ("ADDED", event.obj)
        if before:
            return ("DELETED", event.obj)
        return None

    def offer(self, event: Event) -> None:
        item = self.translate(event)
        if item is not None:
            self.push(item)

    def push(self, item: tuple[str, Obj]) -> None:
        with self.cond:
            self.queue.append(item)
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def get(self, timeout: float) -> tuple[str, Obj] | None:
        with self.cond:
            if not self.queue and not self.closed:
                self.cond.wait(timeout)
            if self.queue:
                return self.queue.popleft()
            return None


class WatchHub:
    """The open watches of every stored kind (not thread-safe itself: the store calls it under its lock)."""

    def __init__(self) -> None:
        self._watchers: dict[str, list[Watcher]] = {k.key: [] for k in STORED_KINDS}

    def open(
        self,
        kind: Kind,
        namespace: str | None,
        predicate: Callable[[Obj], bool],
        replay: list[Event],
        initial: list[Obj],
    ) -> Watcher:
        """A new watch, its queue holding the `replay` events it sees, then ADDED for each of the `initial`
        objects it sees; live events follow."""
        watcher = Watcher(kind, namespace, predicate)
        for event in replay:
            watcher.offer(event)
        for obj in initial:
            if watcher.visible(obj):
                watcher.queue.append(("ADDED", obj))
        self._watchers[kind.key].append(watcher)
        return watcher

    def offer(self, kind: Kind, event: Event) -> None:
        for watcher in list(self._watchers[kind.key]):
            watcher.offer(event)

    def remove(self, watcher: Watcher) -> None:
        watchers = self._watchers[watcher.kind.key]
        if watcher in watchers:
            watchers.remove(watcher)

    def close_all(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.close()
            watchers.clear()
