"""Pushing a bulk request's children from one Celery task, many at a time (threads: the pushes wait on
the network, not on the CPU)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from offloading.changes import apply
from offloading.changes.apply import apply_change
from offloading.changes.authorize import identity_of_change
from offloading.choices import ChangeState
from offloading.cluster import kube
from offloading.models import BulkRequest, ChangeRequest
from offloading.queue import enqueue_bulk, runs_eagerly

log = logging.getLogger(__name__)


# A bulk task hands the children it has not started to a new task after this many seconds, well within
# Celery's time limits; the next one goes on at once.
BULK_TASK_BUDGET = 30.0
# How long the recording thread waits for more pushes to come back before it records those it has.
LINGER = 0.02


def processes_for_a_bulk() -> int:
    """How many worker processes share a bulk: the pushes wait on the network, but deciding and recording
    each change is Python on one core per process; no more than the machine's cores and the worker's
    processes (the requests in flight stay ``KUBE_MAX_INFLIGHT`` in all). One on SQLite: its writers
    in other processes wait for each other in SQLite's sleeping busy handler, while one process
    records a whole batch of pushes in one transaction (:func:`_push_all`)."""
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
    route = _route(bulk_id)
    if parts <= 0:
        parts = 1 if runs_eagerly() else processes_for_a_bulk()
        for other in range(1, parts):
            enqueue_bulk(bulk_id, after_id, other, parts, managed=route)
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
    size = min(max(1, kube.pacer.maximum() // parts), len(ids))
    started, left = _push_all(bulk_id, ids, size, time.monotonic() + BULK_TASK_BUDGET)
    if left:
        # The rest goes to a new task; until it starts them, the sweeper leaves them alone.
        now = timezone.now()
        ChangeRequest.objects.filter(pk__in=left, state=ChangeState.QUEUED, updated_at__lt=now).update(updated_at=now)
        enqueue_bulk(bulk_id, left[0] - 1, part, parts, managed=route)
    return started


def _route(bulk_id: int) -> int | None:
    """The bulk's cluster for ``enqueue_bulk`` (its queue): None for the default cluster's (or a gone bulk)."""
    found = BulkRequest.objects.filter(pk=bulk_id).values_list("managed_id", "managed__is_default").first()
    return None if found is None or found[1] else int(found[0])


def _push_all(bulk_id: int, ids: list[int], size: int, deadline: float) -> tuple[int, list[int]]:
    """Push the changes ``ids`` with ``size`` threads that only talk to the API server
    (:func:`apply.push`), while this thread does the database and the cache for all of them: it claims
    as many changes as there are idle threads (:func:`apply.claim_batch`), and records the pushes that
    came back since it last looked in one transaction (:func:`apply.settle_batch`). One client of the
    database and of Redis per bulk instead of one per thread: one transaction per batch, and no
    thread waiting for the interpreter lock between each of a change's dozen round trips. Returns how
    many it started and the ids it did not start before ``deadline``."""
    todo = list(reversed(ids))
    claimed_q: queue.SimpleQueue[apply.Claimed | None] = queue.SimpleQueue()
    done_q: queue.SimpleQueue[tuple[apply.Claimed, apply.Pushed]] = queue.SimpleQueue()
    identities: dict[int, Any] = {}  # change id -> whom to push it as
    known: dict[tuple[int | None, str, int], Any] = {}  # (requester, cluster) -> identity (a bulk has one)

    def pusher() -> None:
        try:
            while (claimed := claimed_q.get()) is not None:
                change = claimed.change
                try:
                    pushed = apply.push(change, identities[change.pk])
                except Exception as exc:  # noqa: BLE001 - a bug: recorded (and logged) by settle_batch
                    pushed = apply.Pushed(error=exc)
                done_q.put((claimed, pushed))
        finally:
            connections.close_all()  # this thread's connections (a label's read), never reused by another

    threads = [threading.Thread(target=pusher, name=f"bulk-{bulk_id}-{n}", daemon=True) for n in range(size)]
    for thread in threads:
        thread.start()
    started = in_flight = 0

    def next_ids(room: int) -> list[int]:
        nonlocal started
        if room <= 0 or time.monotonic() >= deadline:
            return []
        batch = [todo.pop() for _ in range(min(room, len(todo)))]
        started += len(batch)
        return batch

    def send(claimed: list[apply.Claimed]) -> None:
        nonlocal in_flight
        for item in claimed:
            who = (item.change.requester_id, item.change.requester_name, item.change.managed_id)  # per cluster
            if who not in known:
                known[who] = identity_of_change(item.change)
            identities[item.change.pk] = known[who]
            claimed_q.put(item)
        in_flight += len(claimed)

    try:
        while True:
            if in_flight == 0:
                batch = next_ids(size)
                if not batch:
                    break
                try:
                    send(apply.claim_batch(batch))
                except Exception:  # noqa: BLE001 - left for the sweeper, as a lost message would be
                    log.exception("claiming changes of bulk %s failed", bulk_id)
                continue
            # The first push back, then those that come within LINGER: fewer, larger transactions, each
            # recording what came back and claiming as many changes as threads went idle.
            done = [done_q.get()]
            until = time.monotonic() + LINGER
            while len(done) < in_flight:
                try:
                    done.append(done_q.get(timeout=max(0.0, until - time.monotonic())))
                except queue.Empty:
                    break
            in_flight -= len(done)
            for item, _ in done:
                identities.pop(item.change.pk, None)
            send(apply.settle_batch(done, next_ids(size - in_flight)))
    finally:
        for _ in threads:
            claimed_q.put(None)
        for thread in threads:
            thread.join()
    return started, list(reversed(todo))
