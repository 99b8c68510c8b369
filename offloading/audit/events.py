"""Audit events of the change flow."""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache
from django.utils import timezone

from offloading.audit.trail import Verdict, verify
from offloading.choices import AuditAction, ChangeState
from offloading.context import Actor
from offloading.models import AuditEvent, ChangeRequest

log = logging.getLogger(__name__)


def record_requested(change: ChangeRequest, actor: Actor, before: Any, after: Any, message: str = "") -> None:
    AuditEvent.objects.create(
        user_id=actor.user_id,
        user_name=actor.user_name,
        source=change.source,
        request_id=actor.request_id,
        action=AuditAction.REQUESTED,
        namespace=change.namespace,
        change=change,
        before=before,
        after=after,
        outcome=ChangeState.QUEUED,
        message=message,
    )


def record_bulk_requested(bulk: Any, actor: Actor, namespaces: list[str], retry_of: int | None = None) -> None:
    """The bulk request itself, before the change of each of its namespaces (their own ``requested``
    events follow, each with its change, whose ``bulk`` is this one): what was asked, of which
    namespaces, by whom. Sealed like every event (``AuditEvent.save``)."""
    what = f"retry of the failed changes of bulk #{retry_of}" if retry_of else f"bulk {bulk.action}"
    AuditEvent.objects.create(
        user_id=actor.user_id,
        user_name=actor.user_name,
        source=actor.source,
        request_id=actor.request_id,
        action=AuditAction.BULK_REQUESTED,
        namespace="",
        after={
            "bulk": bulk.pk,
            "action": bulk.action,
            "namespaceSelector": bulk.namespace_selector,
            "spec": bulk.desired_spec,
            "namespaces": sorted(namespaces),
            "skipped": len(bulk.skipped or []),
            **({"retryOf": retry_of} if retry_of else {}),
        },
        outcome=ChangeState.QUEUED,
        message=f"{what} of {len(namespaces)} namespace{'' if len(namespaces) == 1 else 's'} "
        f"matching {bulk.namespace_selector or '(every namespace)'} (bulk #{bulk.pk})",
    )


def record_refused(actor: Actor, namespace: str, action: str, reason: str) -> None:
    """A change the user was not allowed to ask for (by the dashboard's roles and scopes, or by the
    cluster's RBAC): nothing was queued; the trail says who tried what and why it was refused."""
    AuditEvent.objects.create(
        user_id=actor.user_id,
        user_name=actor.user_name,
        source=actor.source,
        request_id=actor.request_id,
        action=AuditAction.REFUSED,
        namespace=namespace,
        outcome="forbidden",
        message=f"{action} refused: {reason}",
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
