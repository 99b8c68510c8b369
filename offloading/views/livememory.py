"""The newest render of each shared live region that one web process has seen, kept in its memory.

While the counters move (a bulk applying), every poll of a region whose counters moved looks up the kept
render of its access (offloading.views.live). In the shared cache (Redis) that is a round trip per poll
carrying the whole region (tens to hundreds of kilobytes at 10,000 namespaces), and each of its reads
gives up the GIL and waits to take it back behind the renders running in the same worker: measured with
py-spy during a bulk, the polls spent more time in those reads than in anything else. A render does not
change once made (it is the region at the counters it was read at), so a process may answer from its own
copy whatever the shared cache would have answered from that copy; it reads the shared cache only when
its copy will not do (another process's may be newer), and keeps the newer of the two.

Bounded by bytes (the least recently used go first) and by age (a copy older than the shared cache keeps
a render is never used).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol


class Render(Protocol):
    @property
    def read_ms(self) -> int: ...

    @property
    def content(self) -> bytes: ...


class RenderMemory:
    def __init__(self, max_bytes: int, max_age_ms: int) -> None:
        self.max_bytes, self.max_age_ms = max_bytes, max_age_ms
        self._renders: OrderedDict[str, Render] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str, now_ms: int) -> Render | None:
        with self._lock:
            render = self._renders.get(key)
            if render is None:
                return None
            if now_ms - render.read_ms > self.max_age_ms:
                self._drop(key)
                return None
            self._renders.move_to_end(key)
            return render

    def keep(self, key: str, render: Render) -> None:
        """Keep ``render`` unless this process already has a newer one of ``key``."""
        if len(render.content) > self.max_bytes:
            return
        with self._lock:
            known = self._renders.get(key)
            if known is not None and known.read_ms >= render.read_ms:
                return
            if known is not None:
                self._drop(key)
            self._renders[key] = render
            self._bytes += len(render.content)
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._renders)))

    def forget(self) -> None:
        with self._lock:
            self._renders.clear()
            self._bytes = 0

    def size(self) -> tuple[int, int]:
        """How many renders are kept, and their bytes."""
        with self._lock:
            return len(self._renders), self._bytes

    def _drop(self, key: str) -> None:
        render = self._renders.pop(key)
        self._bytes -= len(render.content)


class ViewerMemory:
    """Who sends a poll, by session key, as one web process last read it from the database (the session
    row, the user, their role's groups and an operator's scopes): a poll answered early otherwise reads
    them at every poll, two or three round trips out of its three or four. An entry holds while the
    counters it was read under (``marks``: the "sessions" and "access" LiveVersion counters, which
    database triggers bump when a session, a user, a group, a membership or a scope is written, in the
    writer's transaction) are still those of the poll, and until the session expires. The poll reads those
    counters before it looks here, in the same read as its region's counters; on a miss, they are read
    before the rows, so that a write in between moves them past the entry kept.

    Bounded by entries (the least recently used go first)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[tuple[int, ...], float, object]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, marks: tuple[int, ...], now: float) -> object | None:
        """What was kept for ``key`` under ``marks``, if the session has not expired by ``now`` (seconds
        since the epoch)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            kept_marks, expires, value = entry
            if kept_marks != marks or expires <= now:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def keep(self, key: str, marks: tuple[int, ...], expires: float, value: object) -> None:
        with self._lock:
            self._entries[key] = (marks, expires, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
