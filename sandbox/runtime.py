"""A tiny controller runtime: a delaying, de-duplicating work queue drained by one thread.

Keys are `(reconciler name, object key)`. A reconciler returns None when done or a delay in seconds to be
called again; an exception requeues the key with exponential backoff (like controller-runtime).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("sandbox.controller")

Key = tuple[str, str]
Reconciler = Callable[[str], "float | None"]


class Retry(Exception):
    """A reconcile error that requeues after `delay` seconds (None: the usual backoff)."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class Controller:
    def __init__(self, base_backoff: float = 0.05, max_backoff: float = 300.0) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Key]] = []
        self._due: dict[Key, float] = {}
        self._counter = itertools.count()
        self._reconcilers: dict[str, Reconciler] = {}
        self._failures: dict[Key, int] = {}
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self.base_backoff = base_backoff
        self.max_backoff = max_backoff
        self.errors: list[tuple[Key, str]] = []  # recent reconcile errors, for tests and debugging

    def register(self, name: str, reconciler: Reconciler) -> None:
        self._reconcilers[name] = reconciler

    def enqueue(self, name: str, key: str, delay: float = 0.0) -> None:
        due = time.monotonic() + max(delay, 0.0)
        item = (name, key)
        with self._cond:
            current = self._due.get(item)
            if current is not None and current <= due:
                return
            self._due[item] = due
            heapq.heappush(self._heap, (due, next(self._counter), item))
            self._cond.notify_all()

    # -- the loop --------------------------------------------------------------------------------
    def _next(self) -> Key | None:
        with self._cond:
            while not self._stop:
                while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                    heapq.heappop(self._heap)  # stale entry superseded by an earlier due time
                if self._heap:
                    due, _, item = self._heap[0]
                    wait = due - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._heap)
                        del self._due[item]
                        self._busy = True
                        return item
                    self._cond.wait(min(wait, 0.5))
                else:
                    self._cond.notify_all()  # wake wait_idle
                    self._cond.wait(0.5)
            return None

    def run_once(self, item: Key) -> None:
        name, key = item
        try:
            again = self._reconcilers[name](key)
            self._failures.pop(item, None)
            if again is not None:
                self.enqueue(name, key, again)
        except Retry as retry:
            failures = self._failures.get(item, 0) + 1
            self._failures[item] = failures
            delay = (
                retry.delay
                if retry.delay is not None
                else min(self.base_backoff * 2 ** (failures - 1), self.max_backoff)
            )
            self.enqueue(name, key, delay)
        except Exception as exc:  # noqa: BLE001 - a controller keeps going, like the real ones
            failures = self._failures.get(item, 0) + 1
            self._failures[item] = failures
            log.warning("reconcile %s/%s failed: %s", name, key, exc)
            self.errors = (self.errors + [(item, f"{type(exc).__name__}: {exc}")])[-50:]
            self.enqueue(name, key, min(self.base_backoff * 2 ** (failures - 1), self.max_backoff))

    def _loop(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            try:
                self.run_once(item)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def start(self) -> None:
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="sandbox-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def drain(self, horizon: float = 0.0, max_items: int = 10_000_000) -> int:
        """Run every item due within `horizon` seconds synchronously (used before the thread starts)."""
        done = 0
        while done < max_items:
            with self._cond:
                while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                    heapq.heappop(self._heap)
                if not self._heap or self._heap[0][0] > time.monotonic() + horizon:
                    return done
                _, _, item = heapq.heappop(self._heap)
                del self._due[item]
            self.run_once(item)
            done += 1
        return done

    def pending(self, horizon: float) -> int:
        """Items due within `horizon` seconds from now (plus the one running)."""
        limit = time.monotonic() + horizon
        with self._cond:
            return sum(1 for due in self._due.values() if due <= limit) + (1 if self._busy else 0)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until no work is running or due before the deadline; TimeoutError if that never happens.

        Work scheduled after the deadline (for example a deliberately slow peer) does not count.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                remaining = deadline - time.monotonic()
                due_soon = any(due <= deadline for due in self._due.values())
                if not self._busy and not due_soon:
                    return True
                if remaining <= 0:
                    raise TimeoutError(
                        f"the simulated controller is still busy after {timeout}s ({self.pending(0)} items due)"
                    )
                self._cond.wait(min(remaining, 0.05))
