"""Requests in flight shared by the processes of one worker.

A Celery worker runs its tasks in several processes (prefork): two bulks pushed at once by two of them
would each keep ``KUBE_MAX_INFLIGHT`` requests in flight, twice the bound. Here the bound is shared: a
request holds one of ``KUBE_MAX_INFLIGHT`` slots, each slot an exclusive ``flock`` on its own file in
``<LIQO_DASH_VAR_DIR>/kube-inflight/`` (one directory per worker pod: its var dir). The kernel lets go
of a process's locks when it dies, so a pool process killed mid-request (a time limit, out of memory)
leaves no slot taken. Processes with the same var dir on one machine share the bound; worker pods each
have their own.

Each thread takes a slot through its own open file (``flock`` locks belong to the open file, so two
threads of one process exclude each other too). A thread that finds every slot taken looks again
after 1 ms, then up to every 20 ms.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

POLL_FIRST = 0.001
POLL_MAX = 0.02


class SharedSlots:
    """Slots ``0 .. size-1`` held by at most one thread of all the processes using ``directory``."""

    def __init__(self, directory: Path | None = None, subdirectory: str = "") -> None:
        self._directory = directory
        self._subdirectory = subdirectory  # a managed cluster's own slots (its pk); "" for the default's
        self._lock = threading.Lock()
        self._files: dict[int, int] = {}  # slot -> this process's open file of it
        self._held: set[int] = set()  # slots held by threads of this process
        self._unusable = False
        os.register_at_fork(after_in_child=self._forget)

    def directory(self) -> Path:
        if self._directory is None:
            from django.conf import settings  # at first use: the pacer is made when its module is imported

            self._directory = Path(settings.VAR_DIR) / "kube-inflight"
            if self._subdirectory:
                self._directory = self._directory / f"cluster-{self._subdirectory}"
        return self._directory

    def _forget(self) -> None:
        """In a new child process: the files are the parent's (closing them here frees none of its
        locks, which belong to the parent's open files); the child opens its own."""
        for fd in self._files.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock = threading.Lock()
        self._files = {}
        self._held = set()

    def _file(self, slot: int) -> int:
        fd = self._files.get(slot)
        if fd is None:
            directory = self.directory()
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / f"slot-{slot}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._files[slot] = fd
        return fd

    def _try(self, size: int) -> int | None:
        with self._lock:
            start = random.randrange(size)  # noqa: S311 - spreads the threads over the slots, not a secret
            for n in range(size):
                slot = (start + n) % size
                if slot in self._held:
                    continue
                try:
                    fcntl.flock(self._file(slot), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # another process holds it
                self._held.add(slot)
                return slot
        return None

    def acquire(self, size: int) -> int | None:
        """Wait for a free slot among the first ``size`` and hold it; returns it. None (nothing held)
        when the directory cannot be used: the bound is then this process's alone, said once in the log."""
        poll = POLL_FIRST
        while True:
            try:
                slot = self._try(max(1, size))
            except OSError as exc:
                if not self._unusable:
                    self._unusable = True
                    log.warning("requests in flight are bounded per process only: %s: %s", self.directory(), exc)
                return None
            if slot is not None:
                return slot
            time.sleep(poll)
            poll = min(POLL_MAX, poll * 2)

    def release(self, slot: int) -> None:
        with self._lock:
            if slot not in self._held:
                return
            self._held.discard(slot)
            fcntl.flock(self._files[slot], fcntl.LOCK_UN)

    @contextlib.contextmanager
    def held(self, size: int) -> Iterator[int | None]:
        slot = self.acquire(size)
        try:
            yield slot
        finally:
            if slot is not None:
                self.release(slot)

    def in_use(self) -> int:
        """Slots held by this process's threads now."""
        with self._lock:
            return len(self._held)
