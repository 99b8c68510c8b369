"""Audit events: the one constructor of a row of the trail (:func:`record`) and what each kind of event
says, and the verdict of the last verification of the trail.

Each event names the managed cluster it is about (``managed``; None: the default cluster): drift, the
cluster the watcher or the refresh observed it in; a change's events, the change's cluster. What the
seal covers is said in offloading/models/audit.py."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from django.core.cache import cache
from django.utils import timezone

from offloading.audit.trail import Verdict, verify
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.context import Actor
from offloading.models import AuditEvent, ChangeRequest
from offloading.models.fleet import ManagedRef, managed_pk

log = logging.getLogger(__name__)


def record(
    actor: Actor,
    action: str,
    namespace: str,
    *,
    outcome: str,
    change: ChangeRequest | None = None,
    before: Any = None,
    after: Any = None,
    message: str = "",
    managed: ManagedRef = None,
) -> AuditEvent:
    """The one constructor of an audit row: every event of the trail (requested, bulk requested,
    refused, applied/failed/conflict, drift, drift accepted) is written here, by ``actor`` (who, from
    where, under which request id), about the managed cluster ``managed``: when None, the cluster of
    ``change`` (:func:`cluster_of`: an approval, a hold, a hand-off are the change's), else the default
    one. Sealed by ``AuditEvent.save``, inside the caller's transaction."""
    if managed is None and change is not None:
        managed = cluster_of(change)
    event = AuditEvent(
        managed_id=managed_pk(managed),
        user_id=actor.user_id,
        user_name=actor.user_name,
        source=actor.source,
        request_id=actor.request_id,
        action=action,
        namespace=namespace,
        change=change,
        before=before,
        after=after,
        outcome=outcome,
        message=message,
    )
    pending = getattr(_together, "pending", None)
    if pending is not None:
        pending.append(event)  # sealed and written with the others when the block ends
    else:
        event.save(force_insert=True)
    return event


_together = threading.local()


@contextlib.contextmanager
def sealed_together() -> Iterator[list[AuditEvent]]:
    """Within the block, :func:`record` builds the events and keeps them in the list it yields; they
    are sealed and written together, in the order recorded, when the block ends without an error
    (``AuditEvent.append_all``: one lock of the chain's head for all, not five statements each). Use it
    inside the transaction that writes what the events describe; a caller that rolls back a savepoint
    inside the block drops the events recorded since (``del pending[mark:]``). The events have no id
    until the block ends. Nested blocks add to the outermost one's list."""
    outer = getattr(_together, "pending", None)
    if outer is not None:
        yield outer
        return
    pending: list[AuditEvent] = []
    _together.pending = pending
    try:
        yield pending
    finally:
        _together.pending = None
    AuditEvent.append_all(pending)


def cluster_of(change: ChangeRequest) -> int | None:
    """The managed cluster of a change's events: the change's own."""
    return change.managed_id


def requester_of(change: ChangeRequest) -> Actor:
    """The actor a change was asked for by (its events keep the change's own source: ``bulk`` for the
    children of a bulk request)."""
    return Actor(change.requester_id, change.requester_name, change.source, change.request_id)


def record_requested(change: ChangeRequest, actor: Actor, message: str = "") -> AuditEvent:
    """A change was recorded and queued, or kept for an approval or its window (in the same transaction)."""
    return record(
        Actor(actor.user_id, actor.user_name, change.source, actor.request_id),
        AuditAction.REQUESTED,
        change.namespace,
        outcome=change.state or ChangeState.QUEUED,
        change=change,
        before=change.base_spec,
        after=change.desired_spec,
        message=message,
    )


def record_outcome(change: ChangeRequest, state: str, message: str) -> AuditEvent:
    """How a change ended on the worker: applied, failed or conflict."""
    action = {
        ChangeState.APPLIED: AuditAction.APPLIED,
        ChangeState.FAILED: AuditAction.FAILED,
        ChangeState.CONFLICT: AuditAction.CONFLICT,
    }[ChangeState(state)]
    return record(
        requester_of(change),
        action,
        change.namespace,
        outcome=state,
        change=change,
        before=change.base_spec,
        after=change.desired_spec if change.action != ChangeAction.UNOFFLOAD else None,
        message=message,
    )


def record_bulk_requested(bulk: Any, actor: Actor, namespaces: list[str], retry_of: int | None = None) -> AuditEvent:
    """The bulk request itself, before the change of each of its namespaces (their own ``requested``
    events follow, each with its change, whose ``bulk`` is this one): what was asked, of which
    namespaces, by whom."""
    what = f"retry of the failed changes of bulk #{retry_of}" if retry_of else f"bulk {bulk.action}"
    return record(
        actor,
        AuditAction.BULK_REQUESTED,
        "",
        outcome=ChangeState.QUEUED,
        after={
            "bulk": bulk.pk,
            "action": bulk.action,
            "namespaceSelector": bulk.namespace_selector,
            "spec": bulk.desired_spec,
            "namespaces": sorted(namespaces),
            "skipped": len(bulk.skipped or []),
            **({"retryOf": retry_of} if retry_of else {}),
        },
        message=f"{what} of {len(namespaces)} namespace{'' if len(namespaces) == 1 else 's'} "
        f"matching {bulk.namespace_selector or '(every namespace)'} (bulk #{bulk.pk})",
    )


def record_refused(actor: Actor, namespace: str, action: str, reason: str, managed: ManagedRef = None) -> AuditEvent:
    """A change the user was not allowed to ask for (by the dashboard's roles and scopes, or by the
    cluster's RBAC): nothing was queued; the trail says who tried what and why it was refused. Written
    only by ``offloading.changes.authorize.refuse``."""
    message = f"{action} refused: {reason}"
    return record(actor, AuditAction.REFUSED, namespace, outcome="forbidden", message=message, managed=managed)


def record_drift_observed(
    action: str,
    namespace: str,
    field_manager: str,
    before: Any,
    after: Any,
    message: str,
    managed: ManagedRef = None,
) -> AuditEvent:
    """A change of the offloading (or of the scheduling label) observed in the managed cluster
    ``managed`` (None: the default), made without liqo-dash: the writer is only known by its field
    manager."""
    return record(
        Actor(None, field_manager, Source.EXTERNAL, ""),
        action,
        namespace,
        outcome="observed",
        before=before,
        after=after,
        message=message,
        managed=managed,
    )


def record_drift_accepted(
    actor: Actor, namespace: str, spec: Any, drift_seq: int | None, managed: ManagedRef = None
) -> AuditEvent:
    """A user accepted a drift as it is (the answer to it; no change is made), in ``managed``."""
    return record(
        actor,
        AuditAction.DRIFT_ACCEPTED,
        namespace,
        outcome="accepted",
        after=spec,
        message=f"Accepted the change made outside liqo-dash (audit event #{drift_seq}) as it is",
        managed=managed,
    )


_VERIFIED = "liqo-dash:audit-verified"


def verify_and_remember() -> int | None:
    """Verify the audit trail (beat, hourly) and keep the verdict for /metrics and the pages:
    {"ok", "first_bad", "first_bad_seq", "problem", "count", "checked_at"}. Returns the id of the first
    bad event (or -1 when what is wrong is not one row, e.g. deleted newest events), or None."""
    verdict = verify()
    remember(verdict)
    if not verdict.ok:
        log.error("audit trail verification failed: %s", verdict.problem)
    return first_bad(verdict)


def first_bad(verdict: Verdict) -> int | None:
    """The id of the first bad event, -1 when what is wrong is not one row, None when intact."""
    if verdict.ok:
        return None
    return verdict.first_bad_id if verdict.first_bad_id is not None else -1


def remember(verdict: Verdict) -> None:
    """Keep a verdict in the shared cache (Redis), where /metrics and the pages read it."""
    cache.set(
        _VERIFIED,
        {
            "ok": verdict.ok,
            "first_bad": first_bad(verdict),
            "first_bad_seq": verdict.first_bad_seq,
            "problem": verdict.problem,
            "count": verdict.count,
            "checked_at": timezone.now().isoformat(),
        },
        timeout=None,
    )


def last_verification() -> dict[str, Any] | None:
    """The verdict of the last verification, or None when none ran yet."""
    value = cache.get(_VERIFIED)
    return value if isinstance(value, dict) else None
