"""The store's change history, as etcd keeps it: per kind, a log of events (ADDED / MODIFIED / DELETED,
each with the state before) bounded in length and compacted by time. It backs watches from a
resourceVersion and consistent paginated lists (the state of a past revision); what was compacted away
answers 410 Gone.

Not thread-safe itself: the store calls it under its lock."""

from __future__ import annotations

import collections
from dataclasses import dataclass

from sandbox.errors import gone_expired, too_old
from sandbox.kinds import STORED_KINDS, Kind
from sandbox.objects import Key, Obj, obj_key

EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)


@dataclass
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    prev: Obj | None


class History:
    def __init__(self, log_size: int = 20000) -> None:
        self.log_size = log_size
        self._logs: dict[str, collections.deque[Event]] = {k.key: collections.deque() for k in STORED_KINDS}
        # history is complete for every rv >= compacted
        self._compacted: dict[str, int] = {k.key: 0 for k in STORED_KINDS}
        self._marks: collections.deque[tuple[float, int]] = collections.deque()

    def append(self, kind: Kind, event: Event) -> None:
        log = self._logs[kind.key]
        log.append(event)
        while len(log) > self.log_size:
            self._compacted[kind.key] = log.popleft().rv

    def since(self, kind: Kind, rv: int) -> list[Event]:
        """The events after `rv` (a watch resuming there); 410 when they were compacted away."""
        if rv < self._compacted[kind.key]:
            raise too_old(rv, self._compacted[kind.key])
        return [event for event in self._logs[kind.key] if event.rv > rv]

    def states_at(self, kind: Kind, rv: int) -> dict[Key, Obj | None]:
        """The state at `rv` of every key changed since (None: it did not exist); 410 when compacted away."""
        if rv < self._compacted[kind.key]:
            raise gone_expired(EXPIRED_CONTINUE)
        past: dict[Key, Obj | None] = {}
        for event in reversed(self._logs[kind.key]):
            if event.rv <= rv:
                break
            past[obj_key(event.obj)] = event.prev
        return past

    def compact(self, rv: int) -> int:
        """Forget every event up to `rv`."""
        for key, log in self._logs.items():
            while log and log[0].rv <= rv:
                log.popleft()
            self._compacted[key] = max(self._compacted[key], rv)
        return rv

    def mark(self, now: float, rv: int, window: float) -> int | None:
        """Note that the store was at `rv` at `now` (monotonic); the revision older than `window` seconds
        to compact up to, if any (time-based compaction like etcd's)."""
        self._marks.append((now, rv))
        target = None
        while self._marks and now - self._marks[0][0] > window:
            target = self._marks.popleft()[1]
        return target
