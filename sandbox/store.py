"""A thread-safe, multi-version in-memory object store: the sandbox's etcd.

* One global, monotonic resourceVersion counter (like etcd's revision). Every write gets the next value.
* Stored objects are treated as immutable: writers always store a fresh dict, readers that want to change
  an object copy it first (`clone`). That keeps lists of 10,000 objects cheap.
* Every write is recorded in the `History` (watches from a resourceVersion, consistent paginated lists),
  offered to the open watches (`WatchHub`) and told to the change listeners (the simulated controllers).
  One lock (`Store.lock`) guards the objects, the history and the watches.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from sandbox.errors import ApiError, already_exists, conflict, not_found
from sandbox.history import Event, History
from sandbox.kinds import STORED_KINDS, Kind
from sandbox.objects import Key, Obj, clone, obj_key
from sandbox.watch import Watcher, WatchHub

__all__ = ["Key", "Obj", "Store", "Watcher", "clone", "obj_key"]

Listener = Callable[[Kind, str, Obj, "Obj | None"], None]


class _Objects:
    """The current objects of one kind, with their keys sorted on demand."""

    def __init__(self) -> None:
        self.by_key: dict[Key, Obj] = {}
        self._sorted: list[Key] | None = None

    def sorted_keys(self) -> list[Key]:
        if self._sorted is None:
            self._sorted = sorted(self.by_key)
        return self._sorted

    def put(self, key: Key, obj: Obj) -> None:
        if key not in self.by_key:
            self._sorted = None
        self.by_key[key] = obj

    def pop(self, key: Key) -> None:
        del self.by_key[key]
        self._sorted = None

    def as_of(self, past: dict[Key, Obj | None], namespace: str | None, after: Key | None) -> list[Obj]:
        """The objects in key order (keys > `after`, in `namespace` if given), each as `past` had it where
        it has it (None: it did not exist then)."""
        ordered = sorted(set(self.sorted_keys()) | set(past)) if past else self.sorted_keys()
        start = bisect.bisect_right(ordered, after) if after is not None else 0
        if namespace:
            start = max(start, bisect.bisect_left(ordered, (namespace, "")))
        result = []
        for key in ordered[start:]:
            if namespace and key[0] != namespace:
                break
            obj = past[key] if key in past else self.by_key.get(key)
            if obj is not None:
                result.append(obj)
        return result


class Store:
    """Objects of every stored kind and one revision counter; reads, writes, snapshots at a past revision
    and watches, with the history and the watch fan-out as its parts."""

    def __init__(self, log_size: int = 20000) -> None:
        self.lock = threading.RLock()
        self._rv = 1
        self._kinds: dict[str, _Objects] = {k.key: _Objects() for k in STORED_KINDS}
        self._listeners: list[Listener] = []
        self.history = History(log_size)
        self.watches = WatchHub()

    # -- revisions -------------------------------------------------------------------------------
    @property
    def revision(self) -> int:
        with self.lock:
            return self._rv

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def set_revision(self, rv: int) -> None:
        with self.lock:
            self._rv = max(self._rv, rv)

    def add_listener(self, listener: Listener) -> None:
        with self.lock:
            self._listeners.append(listener)

    # -- reads -----------------------------------------------------------------------------------
    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        with self.lock:
            return self._kinds[kind.key].by_key.get((namespace or "", name))

    def must_get(self, kind: Kind, namespace: str, name: str) -> Obj:
        obj = self.get(kind, namespace, name)
        if obj is None:
            raise not_found(kind, name)
        return obj

    def items(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        """Current objects of a kind (optionally one namespace), in key order."""
        with self.lock:
            objects = self._kinds[kind.key]
            keys = objects.sorted_keys()
            if namespace:
                lo = bisect.bisect_left(keys, (namespace, ""))
                out = []
                for key in keys[lo:]:
                    if key[0] != namespace:
                        break
                    out.append(objects.by_key[key])
                return out
            return [objects.by_key[k] for k in keys]

    def snapshot(self, kind: Kind, at_rv: int, namespace: str | None = None, after: Key | None = None) -> Iterator[Obj]:
        """The objects as they were at revision `at_rv`, in key order, with keys > `after`.

        Consistent pagination: continue tokens carry the revision of the first page. Raises 410 when the
        history needed to rebuild that revision was compacted away.
        """
        with self.lock:
            objects = self._kinds[kind.key]
            past = self.history.states_at(kind, at_rv)
            if at_rv > self._rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {at_rv}, current: {self._rv}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]},
                )
            return iter(objects.as_of(past, namespace, after))

    def dump(self) -> dict[str, Any]:
        with self.lock:
            return {
                "revision": self._rv,
                "objects": {
                    key: [objects.by_key[k] for k in objects.sorted_keys()] for key, objects in self._kinds.items()
                },
            }

    # -- writes ----------------------------------------------------------------------------------
    def _record(self, kind: Kind, event: Event) -> None:
        self.history.append(kind, event)
        self.watches.offer(kind, event)
        for listener in self._listeners:
            listener(kind, event.type, event.obj, event.prev)

    def _stamp(self, obj: Obj, rv: int) -> Obj:
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        return obj

    def create(self, kind: Kind, obj: Obj) -> Obj:
        """Store a new object (already fully prepared by the caller) and return it."""
        with self.lock:
            objects = self._kinds[kind.key]
            key = obj_key(obj)
            if key in objects.by_key:
                raise already_exists(kind, key[1])
            rv = self._next_rv()
            self._stamp(obj, rv)
            objects.put(key, obj)
            self._record(kind, Event(rv, "ADDED", obj, None))
            return obj

    def replace(self, kind: Kind, obj: Obj, expected_rv: str | None) -> Obj:
        """Replace an existing object; `expected_rv` (if given) must equal the stored resourceVersion."""
        with self.lock:
            objects = self._kinds[kind.key]
            key = obj_key(obj)
            current = objects.by_key.get(key)
            if current is None:
                raise not_found(kind, key[1])
            if expected_rv is not None and current["metadata"]["resourceVersion"] != expected_rv:
                raise conflict(kind, key[1])
            rv = self._next_rv()
            self._stamp(obj, rv)
            objects.put(key, obj)
            self._record(kind, Event(rv, "MODIFIED", obj, current))
            return obj

    def remove(self, kind: Kind, namespace: str, name: str, expected_rv: str | None = None) -> Obj:
        """Delete an object for good; the DELETED event carries it with a fresh resourceVersion."""
        with self.lock:
            objects = self._kinds[kind.key]
            key = (namespace or "", name)
            current = objects.by_key.get(key)
            if current is None:
                raise not_found(kind, name)
            if expected_rv is not None and current["metadata"]["resourceVersion"] != expected_rv:
                raise conflict(kind, name)
            rv = self._next_rv()
            gone = dict(current)
            gone["metadata"] = dict(current["metadata"], resourceVersion=str(rv))
            objects.pop(key)
            self._record(kind, Event(rv, "DELETED", gone, current))
            return gone

    def load(self, kind: Kind, obj: Obj) -> Obj:
        """Insert without an event (scenario / state-file loading, before anyone watches)."""
        with self.lock:
            rv = self._next_rv()
            if not obj.get("metadata", {}).get("resourceVersion"):
                self._stamp(obj, rv)
            self._kinds[kind.key].put(obj_key(obj), obj)
            return obj

    # -- history ---------------------------------------------------------------------------------
    def compact(self, rv: int | None = None) -> int:
        """Forget history up to `rv` (default: now); older watches and continue tokens get 410."""
        with self.lock:
            return self.history.compact(self._rv if rv is None else rv)

    def mark_and_compact(self, window: float) -> None:
        """Time-based compaction like etcd's: history older than `window` seconds is dropped."""
        with self.lock:
            target = self.history.mark(time.monotonic(), self._rv, window)
            if target is not None:
                self.history.compact(target)

    def reset_history(self) -> None:
        """After loading: history starts now."""
        self.compact()

    # -- watches ---------------------------------------------------------------------------------
    def watch(
        self, kind: Kind, namespace: str | None, predicate: Callable[[Obj], bool], since: int | None, initial: bool
    ) -> Watcher:
        """Open a watch: replay history after `since` (410 if compacted) or, with `initial`, ADDED for
        every current object; then live events. Registration and replay happen under the lock."""
        with self.lock:
            replay = self.history.since(kind, since) if since is not None else []
            return self.watches.open(kind, namespace, predicate, replay, self.items(kind) if initial else [])

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            self.watches.remove(watcher)
        watcher.close()

    def close_watchers(self) -> None:
        with self.lock:
            self.watches.close_all()
