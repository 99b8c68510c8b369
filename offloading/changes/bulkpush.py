"""Pushing a bulk request's children from one Celery task, many at a time (threads: the pushes wait on
the network, not on the CPU)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

from django.conf import settings
from django.db import connections
from django.utils import timezone

from offloading.changes import groupcommit
from offloading.changes.apply import apply_change
from offloading.choices import ChangeState
from offloading.cluster import kube
from offloading.models import ChangeRequest
from offloading.queue import enqueue_bulk, runs_eagerly

log = logging.getLogger(__name__)


# A bulk task hands the children it has not started to a new task after this many seconds, well within
# Celery's time limits; the next one goes on at once.
BULK_TASK_BUDGET = 30.0


def processes_for_a_bulk() -> int:
    """How many worker processes share a bulk: the pushes wait on the network, but deciding and recording
    each change is Python on one core per process; no more than the machine's cores and the worker's
    processes (the requests in flight stay ``KUBE_MAX_INFLIGHT`` in all). One on SQLite: its writers
    in other processes wait for each other in SQLite's sleeping busy handler, while the threads of one
    process group their writes (``groupcommit``)."""
    if connections["default"].vendor == "sqlite":
        return 1
    cores = os.cpu_count() or 1
    return max(1, min(cores, int(getattr(settings, "CELERY_WORKER_CONCURRENCY", 1) or 1), 4))


def apply_bulk(bulk_id: int, after_id: int = 0, part: int = 0, parts: int = 0) -> int:
    """Push the queued children of bulk request ``bulk_id`` (ids above ``after_id``, in id order; those
    whose id is ``part`` modulo ``parts``) from this task, with threads: pushes wait on the network,
    not on the CPU, so a process keeps many requests in flight with threads (each its own database
    connection, closed when it is done) instead of that many processes. ``parts`` 0 (the message the
    bulk request sends): this task decides how many processes share the bulk
    (:func:`processes_for_a_bulk`), sends the other parts, and pushes part 0; the ``KUBE_MAX_INFLIGHT``
    requests in flight are shared between the parts. Each child goes through :func:`apply_change`: its
    claim keeps each namespace's changes in order (a child waiting behind an older change of its
    namespace is skipped here and started by that change when it finishes) and its retries are its own.
    Returns how many children it started."""
    if parts <= 0:
        parts = 1 if runs_eagerly() else processes_for_a_bulk()
        for other in range(1, parts):
            enqueue_bulk(bulk_id, after_id, other, parts)
    ids = [
        pk
        for pk in ChangeRequest.objects.filter(bulk_id=bulk_id, id__gt=after_id, state=ChangeState.QUEUED)
        .order_by("id")
        .values_list("pk", flat=True)
        if pk % parts == part
    ]
    if runs_eagerly() or len(ids) <= 1:
        # Tests run Celery eagerly inside a transaction other threads cannot see: one after the other.
        for change_id in ids:
            apply_change(change_id)
        return len(ids)
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for change_id in ids:
        todo.put(change_id)
    deadline = time.monotonic() + BULK_TASK_BUDGET
    started = [0]
    count_lock = threading.Lock()

    def work() -> None:
        try:
            with groupcommit.writing_thread():
                while time.monotonic() < deadline:
                    try:
                        change_id = todo.get_nowait()
                    except queue.Empty:
                        return
                    with count_lock:
                        started[0] += 1
                    try:
                        apply_change(change_id)
                    except Exception:  # noqa: BLE001 - one change's bug must not stop the others
                        log.exception("applying change %s of bulk %s failed", change_id, bulk_id)
        finally:
            connections.close_all()  # this thread's connections, never reused by another

    threads = [
        threading.Thread(target=work, name=f"bulk-{bulk_id}-{n}", daemon=True)
        for n in range(min(max(1, kube.pacer.maximum() // parts), len(ids)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    left: list[int] = []
    while not todo.empty():
        left.append(todo.get_nowait())
    if left:
        # The rest goes to a new task; until it starts them, the sweeper leaves them alone.
        now = timezone.now()
        ChangeRequest.objects.filter(pk__in=left, state=ChangeState.QUEUED, updated_at__lt=now).update(updated_at=now)
        enqueue_bulk(bulk_id, left[0] - 1, part, parts)
    return started[0]
