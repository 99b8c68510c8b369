"""Sending work to the Celery worker by task name, so that nothing imports ``offloading.tasks`` (the tasks
are thin wrappers that call the use cases; they are found by Celery's autodiscovery)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import current_app
from django.conf import settings

log = logging.getLogger(__name__)

# With CELERY_TASK_ALWAYS_EAGER a task sent from a task runs inside it, its countdown ignored: a change
# that keeps being requeued (another apply of the namespace holds its lock, a retry) would nest until
# Python's recursion limit. Past this depth the task is not run: the change stays queued for the sweeper.
EAGER_NESTING_LIMIT = 8
_eager = threading.local()

APPLY_CHANGE = "offloading.tasks.apply_change"
APPLY_BULK = "offloading.tasks.apply_bulk"
AWAIT_DELETION = "offloading.tasks.await_deletion"
REFRESH = "offloading.tasks.refresh"
REFRESH_UNWATCHED = "offloading.tasks.refresh_unwatched"
PROBE_API = "offloading.tasks.probe_api"
DELIVER_ALERT = "offloading.tasks.deliver_alert"


def send(
    task_name: str, *args: int, countdown: float | None = None, task_id: str | None = None, queue: str | None = None
) -> None:
    """Send ``task_name`` with ``args`` (to ``queue``; None: the default queue or the task's route). With
    CELERY_TASK_ALWAYS_EAGER (tests) the task runs here, so Celery's loader must have found it first
    (autodiscovery, as a worker does at start)."""
    if current_app.conf.task_always_eager and task_name not in current_app.tasks:
        current_app.loader.import_default_modules()
    signature = current_app.signature(task_name, args=args)
    options: dict[str, Any] = {}
    if countdown:
        options["countdown"] = countdown
    if task_id:
        options["task_id"] = task_id
    if queue:
        options["queue"] = queue
    if not current_app.conf.task_always_eager:
        signature.apply_async(**options)
        return
    depth = getattr(_eager, "depth", 0)
    if depth >= EAGER_NESTING_LIMIT:
        log.info("eager mode: %s%s not run, %d tasks deep; the sweeper sends it again", task_name, args, depth)
        return
    _eager.depth = depth + 1
    try:
        signature.apply_async(**options)
    finally:
        _eager.depth = depth


def cluster_queue(managed: int | None) -> str | None:
    """The Celery queue of a managed cluster's changes (issue 28): ``<CLUSTER_QUEUE_PREFIX><pk>`` for a
    non-default cluster (``managed``: its pk) when the prefix is set; None (the default queue) for the
    default cluster (``managed`` None) or without a prefix. The task and its arguments stay the same
    (the change id: the worker reads the change's cluster), so a message of an older version, or one
    consumed from the default queue, is applied all the same."""
    prefix = str(settings.LIQO_DASH.get("CLUSTER_QUEUE_PREFIX") or "")
    return f"{prefix}{managed}" if prefix and managed is not None else None


def enqueue_apply(change_id: int, countdown: float = 0, managed: int | None = None) -> None:
    """Send the apply task (``managed``: the change's cluster's pk when it is not the default one, for
    :func:`cluster_queue`). A broker failure is logged, not raised: the change is already recorded (the
    outbox), and the sweeper sends it again once the broker is back."""
    try:
        send(APPLY_CHANGE, change_id, countdown=countdown, queue=cluster_queue(managed))
    except Exception:  # noqa: BLE001 - kombu/redis raise many types; none may fail the request
        log.warning("could not enqueue change %s; the sweeper will retry it", change_id, exc_info=True)


def runs_eagerly() -> bool:
    """Whether tasks run in place (CELERY_TASK_ALWAYS_EAGER: the tests)."""
    return bool(current_app.conf.task_always_eager)


def enqueue_bulk(bulk_id: int, after_id: int = 0, part: int = 0, parts: int = 0, managed: int | None = None) -> None:
    """Send the task that pushes the queued children of a bulk request (``offloading.changes.bulkpush.
    apply_bulk``; ``managed``: a non-default cluster's pk, routed as its changes are). A broker failure is
    logged: the children are recorded, and the sweeper sends each of them once they have waited
    ``STUCK_AFTER``."""
    try:
        send(APPLY_BULK, bulk_id, after_id, *((part, parts) if parts else ()), queue=cluster_queue(managed))
    except Exception:  # noqa: BLE001 - kombu/redis raise many types; none may fail the request
        log.warning("could not enqueue bulk %s; the sweeper will send its changes", bulk_id, exc_info=True)


def enqueue_await_deletion(change_id: int, countdown: float = 1.0, managed: int | None = None) -> None:
    send(AWAIT_DELETION, change_id, countdown=countdown, queue=cluster_queue(managed))


def enqueue_refresh(countdown: float = 0.5, managed: int | None = None) -> None:
    """Send the snapshot refresh of the managed cluster ``managed`` (its primary key; None: the default
    cluster, sent with no argument as before managed clusters existed)."""
    send(REFRESH, *(() if managed is None else (managed,)), countdown=countdown)


def enqueue_probe(countdown: float = 1.0, managed: int | None = None) -> None:
    """Ask whether the API server answers again (see offloading.cluster.breaker; ``managed``: a non-default
    cluster's pk, sent as the task's argument and routed as its changes are; None: the default cluster,
    no argument as before). Not in eager mode (tests): a probe run in place could only fail again and
    again; the beat's periodic probe and the tests call it instead."""
    if current_app.conf.task_always_eager:
        return
    try:
        send(PROBE_API, *(() if managed is None else (managed,)), countdown=countdown, queue=cluster_queue(managed))
    except Exception:  # noqa: BLE001 - a lost probe is replaced by the periodic one
        log.warning("could not enqueue an API probe", exc_info=True)


def enqueue_alert(alert_id: int, task_id: str) -> None:
    """Send the delivery of an alert as the task ``task_id`` (the id its lease names). A broker failure
    is logged: the alert is recorded, and the periodic check sends it once the lease runs out."""
    try:
        send(DELIVER_ALERT, alert_id, task_id=task_id)
    except Exception:  # noqa: BLE001 - kombu/redis raise many types; none may fail the caller
        log.warning("could not enqueue alert %s; the periodic check will send it", alert_id, exc_info=True)
