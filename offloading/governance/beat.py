"""The beat's work of change governance (issue 29): expire the approval requests past their TTL and
release the scheduled changes whose window opened (``offloading.tasks``). Both read
``offloading.governance.clock``, so tests set the time instead of waiting."""

from __future__ import annotations

import logging
from functools import partial

from django.db import transaction
from django.utils import timezone

from offloading.audit.events import record
from offloading.choices import AuditAction, ChangeState
from offloading.governance import clock, policy, windows
from offloading.governance.approvals import expire, finish, rebase
from offloading.governance.facts import (
    change_hash,
    labels_of,
    queue_of,
    same_version,
    system_actor,
    version_of,
)
from offloading.governance.holds import request_approval
from offloading.models import Approval, ApprovalDecision, ChangeRequest, Namespace, Schedule
from offloading.models.fleet import policy_cluster_name
from offloading.queue import enqueue_apply

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# The beat


def expire_due() -> int:
    """Expire the approval requests past their TTL; how many."""
    count = 0
    for approval in Approval.objects.filter(decision=ApprovalDecision.PENDING, expires_at__lte=clock.now()):
        if approval.bulk_id is not None:
            children = list(ChangeRequest.objects.filter(bulk_id=approval.bulk_id, state=ChangeState.AWAITING_APPROVAL))
        else:
            children = list(
                ChangeRequest.objects.filter(pk=approval.change_id or 0, state=ChangeState.AWAITING_APPROVAL)
            )
        with transaction.atomic():
            expire(approval, children)
        count += 1
    return count


def release_due() -> int:
    """Release the scheduled changes whose time has come (and whose window is open): queued, unless an
    approved one's namespace changed since its approval (then back for a new decision). How many."""
    now = clock.now()
    due = list(
        Schedule.objects.filter(released_at__isnull=True, not_before__lte=now, change__state=ChangeState.SCHEDULED)
        .select_related("change")
        .order_by("not_before", "id")
    )
    released = 0
    for schedule in due:
        change = schedule.change
        with transaction.atomic():
            approval = Approval.objects.filter(change=change).order_by("-id").first()
            if approval is None and change.bulk_id is not None:
                approval = Approval.objects.filter(bulk_id=change.bulk_id).order_by("-id").first()
            if (
                approval is not None
                and approval.decision == ApprovalDecision.APPROVED
                and _changed_one(approval, change)
            ):
                Schedule.objects.filter(pk=schedule.pk).update(released_at=now)
                _ask_again_one(approval.reason, change)
                continue
            cluster = policy_cluster_name(change.managed_id)  # its cluster's windows only
            found = policy.windows_of(change.namespace, labels_of(change.namespace, change.managed_id), cluster)
            if not windows.is_open(found, now):
                later = windows.next_opening(found, now) or now
                Schedule.objects.filter(pk=schedule.pk).update(not_before=later)
                continue
            if ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.SCHEDULED).update(
                state=ChangeState.QUEUED, updated_at=timezone.now(), message=""
            ):
                Schedule.objects.filter(pk=schedule.pk).update(released_at=now)
                route = queue_of(change.managed_id)  # its cluster's queue (the default's: as before)
                send = (
                    partial(enqueue_apply, change.pk)
                    if route is None
                    else partial(enqueue_apply, change.pk, managed=route)
                )
                transaction.on_commit(send, robust=True)
                released += 1
    return released


def _changed_one(approval: Approval, change: ChangeRequest) -> list[str]:
    namespace = Namespace.objects.of(change.managed_id).filter(name=change.namespace).first()
    seen = approval.seen.get(change.namespace, {})
    if not same_version(seen, version_of(namespace)):
        return [change.namespace]
    if seen.get("change") != change_hash(change):
        return [change.namespace]
    return []


def _ask_again_one(reason: str, change: ChangeRequest) -> None:
    """A released change whose namespace moved since its approval: rebased, and a new approval of its own."""
    ChangeRequest.objects.filter(pk=change.pk).update(state=ChangeState.AWAITING_APPROVAL, updated_at=timezone.now())
    change.state = ChangeState.AWAITING_APPROVAL
    why = rebase(change, Namespace.objects.of(change.managed_id).filter(name=change.namespace).first())
    if why:
        finish([change], ChangeState.CANCELLED, why, [ChangeState.AWAITING_APPROVAL])
        record(
            system_actor(),
            AuditAction.CANCELLED,
            change.namespace,
            outcome=ChangeState.CANCELLED,
            change=change,
            message=why,
        )
        return
    request_approval(
        system_actor(),
        change=change,
        bulk=None,
        children=[change],
        reason=reason,
        message=f"the offloading of {change.namespace} changed since change #{change.pk} was approved: "
        "it is now based on it and awaits a new decision",
    )
