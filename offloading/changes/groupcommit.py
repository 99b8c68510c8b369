"""Group commit for the writes of a bulk's threads on SQLite.

SQLite has one writer at a time, and a writer that finds the database locked (by the watcher, by
another thread) sleeps in steps of up to 100 ms before it looks again; each commit also waits for the
disk. A bulk's 32 threads each claim and finish their change: thousands of small transactions, most of
the time spent waiting. Here a thread that wants to write hands its write to the one thread writing
now, which runs every write handed to it meanwhile in one transaction (each in its own savepoint, so
one failing rolls back only itself) and hands each thread its result. On other databases (PostgreSQL:
row locks, many writers) a write runs in place, as before.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from django.db import connections, transaction

T = TypeVar("T")

_lock = threading.Lock()  # held by the thread writing for everyone
# The thread writing for everyone waits this long for more writes before it begins: fewer, larger
# transactions, and the database is free between them for the other processes (the watcher's writes,
# which SQLite's busy handler retries only every few tens of milliseconds).
LINGER = 0.03
_pending: list[tuple[Callable[[], Any], Future[Any]]] = []
_pending_lock = threading.Lock()


_threads_writing = 0  # threads of a bulk writing through here now (a lone writer does not linger)


@contextlib.contextmanager
def writing_thread() -> Iterator[None]:
    """Mark the current thread as one of several that write through here (a bulk's pushing threads)."""
    global _threads_writing
    with _pending_lock:
        _threads_writing += 1
    try:
        yield
    finally:
        with _pending_lock:
            _threads_writing -= 1


def write(fn: Callable[[], T]) -> T:
    """Run ``fn`` (ORM writes) in a transaction, grouped with the writes other threads of this process
    are waiting to make; returns its result or raises its exception."""
    if connections["default"].vendor != "sqlite" or connections["default"].in_atomic_block:
        return fn()
    done: Future[T] = Future()
    with _pending_lock:
        _pending.append((fn, done))
    while not done.done():
        if not _lock.acquire(timeout=0.05):
            continue
        try:
            if not done.done() and _threads_writing > 1:
                time.sleep(LINGER)
            with _pending_lock:
                batch = list(_pending)
                _pending.clear()
            if batch:
                _run(batch)
        finally:
            _lock.release()
    return done.result()


def _run(batch: list[tuple[Callable[[], Any], Future[Any]]]) -> None:
    results: list[tuple[Future[Any], Any, BaseException | None]] = []
    try:
        with transaction.atomic():
            for fn, _ in batch:
                try:
                    with transaction.atomic():
                        value = fn()
                except Exception as exc:  # noqa: BLE001 - handed to the thread that asked
                    results.append((batch[len(results)][1], None, exc))
                else:
                    results.append((batch[len(results)][1], value, None))
    except Exception as exc:  # noqa: BLE001 - the commit itself failed: every write of the group did
        for _, future in batch:
            if not future.done():
                future.set_exception(exc)
        return
    for future, value, error in results:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
