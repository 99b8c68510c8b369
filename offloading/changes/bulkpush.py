"""Pushing a bulk request's children from one Celery task, many at a time (threads: the pushes wait on
the network, not on the CPU)."""

from __future__ import annotations

import logging
import queue
import threading
import time

from django.db import connections
from django.utils import timezone

from offloading import kube
from offloading.changes.apply import apply_change
from offloading.changes.queue import enqueue_bulk, runs_eagerly
from offloading.choices import ChangeState
from offloading.models import ChangeRequest

log = logging.getLogger(__name__)


# A bulk task hands the children it has not started to a new task after this many seconds, well within
# Celery's time limits; the next one goes on at once.
BULK_TASK_BUDGET = 30.0


def apply_bulk(bulk_id: int, after_id: int = 0) -> int:
    """Push the queued children of bulk request ``bulk_id`` (ids above ``after_id``, in id order) from
    this one task, ``KUBE_MAX_INFLIGHT`` at a time: pushes wait on the network, not on the CPU, so one
    process keeps that many requests in flight with threads (each thread its own database connection,
    closed when it is done) instead of that many processes. Each child goes through
    :func:`apply_change`: its claim keeps each namespace's changes in order (a child waiting behind an
    older change of its namespace is skipped here and started by that change when it finishes) and its
    retries are its own. Returns how many children it started."""
    ids = list(
        ChangeRequest.objects.filter(bulk_id=bulk_id, id__gt=after_id, state=ChangeState.QUEUED)
        .order_by("id")
        .values_list("pk", flat=True)
    )
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
        for n in range(min(kube.pacer.maximum(), len(ids)))
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
        enqueue_bulk(bulk_id, after_id=left[0] - 1)
    return started[0]
