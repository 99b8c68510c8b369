"""A thread-safe, multi-version in-memory object store: the sandbox's etcd.

* One global, monotonic resourceVersion counter (like etcd's revision). Every write gets the next value.
* Stored objects are treated as immutable: writers always store a fresh dict, readers that want to change
  an object copy it first (`copy.deepcopy`). That keeps lists of 10,000 objects cheap.
* Per-kind event log (ADDED / MODIFIED / DELETED, each with the previous state) bounded in length; it backs
  watches from a resourceVersion and consistent paginated lists (a continue token reads the snapshot of the
  first page). Events older than the compaction point answer 410 Gone.
"""

from __future__ import annotations

import bisect
import collections
import marshal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sandbox.errors import ApiError, already_exists, conflict, gone_expired, not_found, too_old
from sandbox.kinds import STORED_KINDS, Kind

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)

EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)


def clone(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars), several times faster than copy.deepcopy
    (marshal copies in C; anything marshal refuses is copied in Python)."""
    if isinstance(value, (dict, list)):
        try:
            return marshal.loads(marshal.dumps(value))
        except ValueError:
            return _clone(value)
    return value


def _clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def obj_key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


@dataclass
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    prev: Obj | None


class Watcher:
    """One open watch: events are pushed by the store (under its lock) and pulled by the HTTP thread."""

    def __init__(self, kind: Kind, namespace: str | None, predicate: Callable[[Obj], bool]) -> None:
        self.kind = kind
        self.namespace = namespace
        self.predicate = predicate
        self.cond = threading.Condition()
        self.queue: collections.deque[tuple[str, Obj]] = collections.deque()
        self.closed = False

    def _visible(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return False
        return self.predicate(obj)

    def translate(self, event: Event) -> tuple[str, Obj] | None:
        """Kubernetes' filtered-watch rule: an object entering the selection is ADDED, leaving it DELETED."""
        now = event.type != "DELETED" and self._visible(event.obj)
        before = self._visible(event.prev) if event.type != "ADDED" else False
        if event.type == "DELETED":
            return ("DELETED", event.obj) if self._visible(event.obj) else None
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


@dataclass
class _KindState:
    objects: dict[Key, Obj] = field(default_factory=dict)
    log: collections.deque[Event] = field(default_factory=collections.deque)
    compacted: int = 0  # history is complete for every rv >= compacted
    sorted_keys: list[Key] | None = None
    watchers: list[Watcher] = field(default_factory=list)


Listener = Callable[[Kind, str, Obj, "Obj | None"], None]


class _StoreReads:
    """The state of the store and its reads: objects of every stored kind, one revision counter,
    change listeners, and consistent snapshots at a past revision (for paginated lists)."""

    def __init__(self, log_size: int = 20000) -> None:
        self.lock = threading.RLock()
        self.log_size = log_size
        self._rv = 1
        self._kinds: dict[str, _KindState] = {k.key: _KindState() for k in STORED_KINDS}
        self._listeners: list[Listener] = []
        self._marks: collections.deque[tuple[float, int]] = collections.deque()

    # -- revisions -------------------------------------------------------------------------------
    @property
    def revision(self) -> int:
        with self.lock:
            return self._rv

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def add_listener(self, listener: Listener) -> None:
        with self.lock:
            self._listeners.append(listener)

    # -- reads -----------------------------------------------------------------------------------
    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        with self.lock:
            return self._kinds[kind.key].objects.get((namespace or "", name))

    def must_get(self, kind: Kind, namespace: str, name: str) -> Obj:
        obj = self.get(kind, namespace, name)
        if obj is None:
            raise not_found(kind, name)
        return obj

    def count(self, kind: Kind) -> int:
        with self.lock:
            return len(self._kinds[kind.key].objects)

    def items(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        """Current objects of a kind (optionally one namespace), in key order."""
        with self.lock:
            state = self._kinds[kind.key]
            keys = self._sorted(state)
            if namespace:
                lo = bisect.bisect_left(keys, (namespace, ""))
                out = []
                for key in keys[lo:]:
                    if key[0] != namespace:
                        break
                    out.append(state.objects[key])
                return out
            return [state.objects[k] for k in keys]

    @staticmethod
    def _sorted(state: _KindState) -> list[Key]:
        if state.sorted_keys is None:
            state.sorted_keys = sorted(state.objects)
        return state.sorted_keys

    def snapshot(self, kind: Kind, at_rv: int, namespace: str | None = None, after: Key | None = None) -> Iterator[Obj]:
        """The objects as they were at revision `at_rv`, in key order, with keys > `after`.

        Consistent pagination: continue tokens carry the revision of the first page. Raises 410 when the
        history needed to rebuild that revision was compacted away.
        """
        with self.lock:
            state = self._kinds[kind.key]
            if at_rv < state.compacted:
                raise gone_expired(EXPIRED_CONTINUE)
            if at_rv > self._rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {at_rv}, current: {self._rv}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]},
                )
            # The state at at_rv of every key touched since: the `prev` of its first later event.
            past: dict[Key, Obj | None] = {}
            for event in reversed(state.log):
                if event.rv <= at_rv:
                    break
                past[obj_key(event.obj)] = event.prev
            keys = set(self._sorted(state)) | set(past)
            ordered = sorted(keys) if past else self._sorted(state)
            start = bisect.bisect_right(ordered, after) if after is not None else 0
            if namespace:
                start = max(start, bisect.bisect_left(ordered, (namespace, "")))
            result = []
            for key in ordered[start:]:
                if namespace and key[0] != namespace:
                    break
                obj = past[key] if key in past else state.objects.get(key)
                if obj is not None:
                    result.append(obj)
        return iter(result)

    def dump(self) -> dict[str, Any]:
        with self.lock:
            return {
                "revision": self._rv,
                "objects": {key: [state.objects[k] for k in self._sorted(state)] for key, state in self._kinds.items()},
            }


class Store(_StoreReads):
    """Objects of every stored kind, one revision counter, watch logs and change listeners: the writes,
    compaction of the history and watches (reads in _StoreReads)."""

    # -- writes ----------------------------------------------------------------------------------
    def _record(self, kind: Kind, state: _KindState, event: Event) -> None:
        state.log.append(event)
        while len(state.log) > self.log_size:
            state.compacted = state.log.popleft().rv
        for watcher in list(state.watchers):
            watcher.offer(event)
        for listener in self._listeners:
            listener(kind, event.type, event.obj, event.prev)

    def _stamp(self, obj: Obj, rv: int) -> Obj:
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        return obj

    def create(self, kind: Kind, obj: Obj) -> Obj:
        """Store a new object (already fully prepared by the caller) and return it."""
        with self.lock:
            state = self._kinds[kind.key]
            key = obj_key(obj)
            if key in state.objects:
                raise already_exists(kind, key[1])
            rv = self._next_rv()
            self._stamp(obj, rv)
            state.objects[key] = obj
            state.sorted_keys = None
            self._record(kind, state, Event(rv, "ADDED", obj, None))
            return obj

    def replace(self, kind: Kind, obj: Obj, expected_rv: str | None) -> Obj:
        """Replace an existing object; `expected_rv` (if given) must equal the stored resourceVersion."""
        with self.lock:
            state = self._kinds[kind.key]
            key = obj_key(obj)
            current = state.objects.get(key)
            if current is None:
                raise not_found(kind, key[1])
            if expected_rv is not None and current["metadata"]["resourceVersion"] != expected_rv:
                raise conflict(kind, key[1])
            rv = self._next_rv()
            self._stamp(obj, rv)
            state.objects[key] = obj
            self._record(kind, state, Event(rv, "MODIFIED", obj, current))
            return obj

    def remove(self, kind: Kind, namespace: str, name: str, expected_rv: str | None = None) -> Obj:
        """Delete an object for good; the DELETED event carries it with a fresh resourceVersion."""
        with self.lock:
            state = self._kinds[kind.key]
            key = (namespace or "", name)
            current = state.objects.get(key)
            if current is None:
                raise not_found(kind, name)
            if expected_rv is not None and current["metadata"]["resourceVersion"] != expected_rv:
                raise conflict(kind, name)
            rv = self._next_rv()
            gone = dict(current)
            gone["metadata"] = dict(current["metadata"], resourceVersion=str(rv))
            del state.objects[key]
            state.sorted_keys = None
            self._record(kind, state, Event(rv, "DELETED", gone, current))
            return gone

    def load(self, kind: Kind, obj: Obj) -> Obj:
        """Insert without an event (scenario / state-file loading, before anyone watches)."""
        with self.lock:
            state = self._kinds[kind.key]
            rv = self._next_rv()
            if not obj.get("metadata", {}).get("resourceVersion"):
                self._stamp(obj, rv)
            state.objects[obj_key(obj)] = obj
            state.sorted_keys = None
            return obj

    def set_revision(self, rv: int) -> None:
        with self.lock:
            self._rv = max(self._rv, rv)

    # -- history ---------------------------------------------------------------------------------
    def compact(self, rv: int | None = None) -> int:
        """Forget history up to `rv` (default: now); older watches and continue tokens get 410."""
        with self.lock:
            target = self._rv if rv is None else rv
            for state in self._kinds.values():
                while state.log and state.log[0].rv <= target:
                    state.log.popleft()
                state.compacted = max(state.compacted, target)
            return target

    def mark_and_compact(self, window: float) -> None:
        """Time-based compaction like etcd's: history older than `window` seconds is dropped."""
        now = time.monotonic()
        with self.lock:
            self._marks.append((now, self._rv))
            target = None
            while self._marks and now - self._marks[0][0] > window:
                target = self._marks.popleft()[1]
            if target is not None:
                self.compact(target)

    def oldest(self, kind: Kind) -> int:
        with self.lock:
            return self._kinds[kind.key].compacted

    # -- watches ---------------------------------------------------------------------------------
    def watch(
        self, kind: Kind, namespace: str | None, predicate: Callable[[Obj], bool], since: int | None, initial: bool
    ) -> Watcher:
        """Open a watch: replay history after `since` (410 if compacted) or, with `initial`, ADDED for
        every current object; then live events. Registration and replay happen under the lock."""
        watcher = Watcher(kind, namespace, predicate)
        with self.lock:
            state = self._kinds[kind.key]
            if since is not None:
                if since < state.compacted:
                    raise too_old(since, state.compacted)
                for event in state.log:
                    if event.rv > since:
                        watcher.offer(event)
            if initial:
                for key in self._sorted(state):
                    obj = state.objects[key]
                    if watcher._visible(obj):
                        watcher.queue.append(("ADDED", obj))
            state.watchers.append(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            watchers = self._kinds[watcher.kind.key].watchers
            if watcher in watchers:
                watchers.remove(watcher)
        watcher.close()

    def close_watchers(self) -> None:
        with self.lock:
            for state in self._kinds.values():
                for watcher in state.watchers:
                    watcher.close()
                state.watchers.clear()

    def reset_history(self) -> None:
        """After loading: history starts now."""
        self.compact()
