"""Thin Celery wrappers around the use cases in offloading.changes: ids in, no model instances.

Nothing imports this module: work is sent by task name (offloading/queue.py), and Celery finds
these tasks by autodiscovery.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

from celery import shared_task

from liqo_dash import logs
from offloading.alerts import delivery as alertsend
from offloading.alerts import rules as alerts
from offloading.audit import events as audit
from offloading.audit import trail as audittrail
from offloading.changes import apply, bulkpush
from offloading.changes import sweep as sweeper
from offloading.cluster import breaker as apihealth
from offloading.cluster import managed
from offloading.cluster.pace import paced
from offloading.governance import beat as governance
from offloading.models import ChangeRequest, ManagedCluster
from offloading.models.fleet import is_default
from offloading.queue import (
    APPLY_BULK,
    APPLY_CHANGE,
    AWAIT_DELETION,
    DELIVER_ALERT,
    PROBE_API,
    REFRESH,
    REFRESH_UNWATCHED,
)
from offloading.snapshot import refresh as snapshot

log = logging.getLogger(__name__)


def _change_fields(args: tuple[Any, ...]) -> dict[str, Any]:
    """The change id and its namespace, on every record logged while a change's task runs."""
    if not args:
        return {}
    fields: dict[str, Any] = {"change_id": args[0]}
    try:
        fields["namespace"] = ChangeRequest.objects.filter(pk=args[0]).values_list("namespace", flat=True).first()
    except Exception:  # noqa: BLE001 - logging context must never break a task
        log.debug("no namespace for change %s", args[0], exc_info=True)
    return fields


logs.describe_task(APPLY_CHANGE, _change_fields)
logs.describe_task(AWAIT_DELETION, _change_fields)


@shared_task(name=APPLY_CHANGE, acks_late=True)
def apply_change(change_id: int) -> str:
    return apply.apply_change(change_id)


# One task pushes a bulk's children with threads (bulkpush.apply_bulk); it hands over what is left after
# BULK_TASK_BUDGET seconds, and its limits leave room for the changes in flight to finish.
@shared_task(name=APPLY_BULK, acks_late=True, soft_time_limit=240, time_limit=300)
def apply_bulk(bulk_id: int, after_id: int = 0, part: int = 0, parts: int = 0) -> int:
    return bulkpush.apply_bulk(bulk_id, after_id, part, parts)


@shared_task(name=AWAIT_DELETION, acks_late=True)
def await_deletion(change_id: int) -> str:
    with paced():
        return apply.await_deletion(change_id)


@shared_task(name=REFRESH, acks_late=True)
def refresh(managed_id: int | None = None) -> dict[str, Any] | None:
    """The snapshot refresh of one managed cluster (its primary key; none: the default cluster)."""
    if managed_id is not None and not ManagedCluster.objects.filter(pk=managed_id).exists():
        return None  # removed since it was asked for: its rows went with it
    # The worker's reads of its own API server share its bound on requests in flight (and its 429
    # backoff) with its pushes; another cluster's reads go to another API server: not through them.
    home = managed_id is None or is_default(managed_id)
    with paced() if home else nullcontext():
        report = snapshot.refresh_once(managed_id)
    return report.__dict__ if report else None


# Beat's periodic refresh (LIQO_DASH_REFRESH_INTERVAL > 0): one refresh task per managed cluster that no
# watcher keeps now.
@shared_task(name=REFRESH_UNWATCHED, acks_late=True)
def refresh_unwatched() -> list[str]:
    return snapshot.refresh_unwatched()


@shared_task(name="offloading.tasks.sweep", acks_late=True)
def sweep() -> int:
    sweeper.trim_history()
    return sweeper.sweep()


@shared_task(name=PROBE_API, acks_late=True)
def probe_api(managed_id: int | None = None) -> bool:
    """Whether a managed cluster's API server answers again (its pk; none: the default cluster, the
    message of single-cluster versions), through that cluster's pacer."""
    with paced(managed_id):
        return apihealth.probe(managed_id)


@shared_task(name="offloading.tasks.verify_audit", acks_late=True)
def verify_audit() -> int | None:
    return audit.verify_and_remember()


@shared_task(name="offloading.tasks.anchor_audit", acks_late=True)
def anchor_audit() -> dict[str, Any]:
    return audittrail.anchor()


@shared_task(name=DELIVER_ALERT, bind=True, acks_late=True, max_retries=None)
def deliver_alert(self: Any, alert_id: int) -> str:
    # The task id names the alert's lease; a retry keeps it (alertsend decides whether and when).
    retries = self.request.retries
    while True:
        outcome = alertsend.deliver(alert_id, self.request.id or "", retries)
        if outcome.retry_in is None:
            return outcome.status
        if not self.request.is_eager:
            raise self.retry(countdown=outcome.retry_in)
        retries += 1  # eager (tests): Celery would raise the Retry; retry here, at once


@shared_task(name="offloading.tasks.check_alerts", acks_late=True)
def check_alerts() -> dict[str, int]:
    return alerts.check()


# Change governance (issue 29): scheduled changes whose window opened go to the queue; approval requests
# past their TTL expire. Both read offloading.governance.clock, so tests set the time instead of waiting.
@shared_task(name="offloading.tasks.release_scheduled", acks_late=True)
def release_scheduled() -> int:
    return governance.release_due()


@shared_task(name="offloading.tasks.expire_approvals", acks_late=True)
def expire_approvals() -> int:
    return governance.expire_due()


# Managed clusters (issue 28): make the configured contexts' rows exist, then read each cluster's Liqo
# cluster id and version and note whether it answers (beat: every 60 s).
@shared_task(name="offloading.tasks.refresh_managed_clusters", acks_late=True, soft_time_limit=120, time_limit=150)
def refresh_managed_clusters() -> dict[str, int]:
    return managed.refresh_all()
