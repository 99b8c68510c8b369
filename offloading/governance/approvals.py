"""Four-eyes approval and change windows of recorded changes: the decisions and the beat's work.

The rules:

- **Who waits.** ``offloading.changes.requests`` asks ``holds.gate`` before it records a change: a change
  the policy (``offloading.governance.policy``) says needs a second person is recorded
  ``awaiting_approval``; else a change outside its scope's change window is recorded ``scheduled``, to be
  released when the window opens; else it is queued as before. ``holds.hold`` then writes the approval
  request or the schedule, the audit rows and the notification, in the same transaction. A bulk is
  asked once for all its namespaces (``holds.gate_bulk``): one approval for the whole bulk, with its impact.
- **Who decides.** Another person than the requester, with the rights to make that change on the
  namespace (every namespace of a bulk): the same rule as asking for it (``access.policy.can_change``,
  which ``offloading.changes.authorize.permit`` applies to requests). A viewer, an operator out of scope
  and the requester are refused (403), a change already decided, expired or cancelled is a 409.
  Rejecting needs a comment.
- **What is applied.** The approval keeps the hash of the change as the approver saw it (namespace,
  action, base and desired spec) and the version of each namespace in the snapshot (uid, generation and
  spec; not the resourceVersion, which every status write of Liqo's controller moves). When the
  namespace changed meanwhile, or the change is not the one approved, the approval is superseded: the
  change is based on the namespace as it is now and goes back for a new decision (409 to the approver),
  or is cancelled when it no longer applies (unoffloaded, or offloaded by someone else). The worker
  applies the change row, which nothing edits after it is recorded: what is applied is what was approved.
  The same check runs when an approved change is released from its window.
- **Expiry.** A request not decided within APPROVAL_TTL (24 h) expires (``beat.expire_due``).
- **Windows.** An approved change outside its window is scheduled for the next opening; a scheduled
  bulk spreads over the first half of its window (``offloading.governance.windows.spread``); the beat
  releases what is due (``beat.release_due``). A waiting change may be cancelled (the requester, or anyone
  who may change the namespace).
- **Break glass.** An admin may apply a waiting change at once, without approval and outside its
  window, with a mandatory reason: audited ``broke_glass`` and alerted.
- **Order per namespace.** A waiting change holds nothing: the worker only sees queued changes, and a
  queued change waits only for older *queued or applying* changes of its namespace. So a change asked
  for after one that awaits approval goes ahead; the waiting one, once released, is checked against the
  namespace as it then is (above).

Every step is a row of the sealed audit trail (``offloading.audit.events.record``); all times are
``offloading.governance.clock.now``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from access import policy as access_policy
from access import roles
from offloading.audit.events import record, record_refused, requester_of
from offloading.choices import AuditAction, ChangeAction, ChangeState
from offloading.context import Actor
from offloading.governance import clock, notify, policy, windows
from offloading.governance.facts import (
    WAITING,
    Refused,
    at_text,
    change_hash,
    change_path,
    labels_of,
    namespaces_of,
    page_path,
    policy_action,
    queue_of,
    same_version,
    system_actor,
    version_of,
)
from offloading.governance.holds import request_approval, schedule_change, schedule_spread, window_gate
from offloading.models import Approval, ApprovalDecision, BulkRequest, ChangeRequest, Namespace, Schedule
from offloading.models.fleet import policy_cluster_name
from offloading.queue import enqueue_apply, enqueue_bulk
from offloading.whatif.destructive import is_destructive

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# Deciding


def _person(actor: Actor) -> Any:
    user = get_user_model().objects.filter(pk=actor.user_id).first() if actor.user_id is not None else None
    if user is None:
        raise Refused(403, "a decision needs a person: log in as the approver")
    return user


def _pending(change_id: int | None = None, bulk_id: int | None = None) -> tuple[Approval, list[ChangeRequest]]:
    """The approval that awaits a decision and its changes, or a 404/409."""
    if bulk_id is not None:
        bulk = BulkRequest.objects.filter(pk=bulk_id).first()
        if bulk is None:
            raise Refused(404, f"bulk request {bulk_id} does not exist", "bulk")
        approval = Approval.objects.filter(bulk=bulk).order_by("-id").first()
        children = list(bulk.changes.filter(state=ChangeState.AWAITING_APPROVAL).order_by("id"))
        what = f"bulk #{bulk_id}"
    else:
        change = ChangeRequest.objects.filter(pk=change_id or 0).first()
        if change is None:
            raise Refused(404, f"change {change_id} does not exist")
        approval = Approval.objects.filter(change=change).order_by("-id").first()
        children = [change] if change.state == ChangeState.AWAITING_APPROVAL else []
        what = f"change #{change_id}"
        if approval is None and change.bulk_id is not None:
            raise Refused(409, f"{what} is part of bulk #{change.bulk_id}: decide on the bulk")
    if approval is None:
        raise Refused(409, f"{what} does not need an approval")
    if approval.decision != ApprovalDecision.PENDING or not children:
        decision = approval.get_decision_display().lower()
        by = f" by {approval.decided_by_name}" if approval.decided_by_name else ""
        raise Refused(409, f"{what} is no longer awaiting a decision: {decision}{by}")
    return approval, children


def _subject(change_id: int | None, bulk_id: int | None, managed: int | None = None) -> list[ChangeRequest]:
    """Every change of the change or bulk a step is about (404 when there is none, or for an id no row
    can have). ``managed``: the managed cluster (pk) the step is asked in (a page's or an API path's,
    ``/m/<name>/``): a change or bulk of another cluster is not found there, as on its own pages; None
    (a caller that names no cluster): any."""
    for given, what, field in ((change_id, "change", "change"), (bulk_id, "bulk request", "bulk")):
        if given is not None and not 0 < given < 2**63:
            raise Refused(404, f"{what} {given} does not exist", field)
    if bulk_id is not None:
        bulks = BulkRequest.objects.filter(pk=bulk_id)
        if not (bulks if managed is None else bulks.filter(managed_id=managed)).exists():
            raise Refused(404, f"bulk request {bulk_id} does not exist", "bulk")
        return list(ChangeRequest.objects.filter(bulk_id=bulk_id).order_by("id"))
    change = ChangeRequest.objects.filter(pk=change_id or 0).first()
    if change is None or (managed is not None and change.managed_id != managed):
        raise Refused(404, f"change {change_id} does not exist")
    return [change]


def rights_reason(user: Any, changes: list[ChangeRequest]) -> str:
    """Why ``user`` may not make ``changes`` themselves ("" when they may): the rule of asking for them
    (``access.policy.can_change``, as ``offloading.changes.authorize.permit`` applies it)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return "you are not logged in"
    labels = dict(namespaces_of(changes).values_list("name", "labels"))
    cluster = policy_cluster_name(changes[0].managed_id) if changes else None  # one request's: one cluster
    for change in changes:
        decision = access_policy.can_change(
            user, change.namespace, labels.get(change.namespace), policy_action(change), cluster=cluster
        )
        if not decision.allowed:
            return f"you may not decide on a change of namespace {change.namespace}: {decision.reason}"
    return ""


def _own(approval: Approval, user: Any) -> str:
    if approval.requester_id is not None and approval.requester_id == user.pk:
        return (
            "you asked for this change: another person with rights on the namespace must approve or reject it "
            "(you may cancel it)"
        )
    return ""


def may_decide(user: Any, approval: Approval, children: list[ChangeRequest]) -> str:
    """Why ``user`` may not decide on ``approval`` ("" when they may): not the requester, and the rights
    on every namespace of its changes."""
    if user is None or not getattr(user, "is_authenticated", False):
        return "you are not logged in"
    return _own(approval, user) or rights_reason(user, children)


def _refuse(actor: Actor, changes: list[ChangeRequest], verb: str, reason: str) -> Refused:
    """The 403 to raise, audited ``refused`` under the changes' managed cluster (one request's: one cluster)."""
    managed = changes[0].managed_id if changes else None
    record_refused(actor, changes[0].namespace if len(changes) == 1 else "", verb, reason, managed=managed)
    return Refused(403, reason[:1].upper() + reason[1:])


def _check_rights(actor: Actor, changes: list[ChangeRequest], verb: str) -> Any:
    """The person behind ``actor``, when they may make ``changes`` (403, audited as refused, otherwise)."""
    user = _person(actor)
    reason = rights_reason(user, changes)
    if reason:
        raise _refuse(actor, changes, verb, reason)
    return user


def _expired_now(approval: Approval) -> bool:
    return approval.expires_at <= clock.now()


def _changed(approval: Approval, children: list[ChangeRequest]) -> list[str]:
    """The namespaces that changed since the approval was asked (or whose change is not the one seen)."""
    current = {ns.name: version_of(ns) for ns in namespaces_of(children)}
    return [
        c.namespace
        for c in children
        if not same_version(approval.seen.get(c.namespace, {}), current.get(c.namespace, {"offloaded": False}))
        or approval.seen.get(c.namespace, {}).get("change") != change_hash(c)
    ]


def finish(changes: Iterable[ChangeRequest], state: str, message: str, from_states: Iterable[str]) -> list[int]:
    """Move waiting changes to a terminal ``state``; the ids this call moved."""
    now = timezone.now()
    moved = []
    for change in changes:
        if ChangeRequest.objects.filter(pk=change.pk, state__in=list(from_states)).update(
            state=state, message=message, finished_at=now, updated_at=now
        ):
            change.state = state
            moved.append(change.pk)
    return moved


def rebase(change: ChangeRequest, namespace: Namespace | None) -> str:
    """Base ``change`` on the namespace as the snapshot has it now; why it no longer applies ("" if it does)."""
    offloaded = namespace is not None and namespace.offloaded
    if change.action in (ChangeAction.UNOFFLOAD, ChangeAction.UPDATE) and not offloaded:
        return f"namespace {change.namespace} was unoffloaded meanwhile: ask again if it is still needed"
    if change.action == ChangeAction.OFFLOAD and offloaded:
        return f"namespace {change.namespace} was offloaded by someone else meanwhile: ask again based on it"
    if offloaded and namespace is not None:
        change.base_spec = namespace.offloading_spec
        change.base_generation = namespace.offloading_generation
        change.base_resource_version = namespace.offloading_resource_version
        change.base_uid = namespace.offloading_uid
        ChangeRequest.objects.filter(pk=change.pk).update(
            base_spec=change.base_spec,
            base_generation=change.base_generation,
            base_resource_version=change.base_resource_version,
            base_uid=change.base_uid,
            updated_at=timezone.now(),
        )
    return ""


def _settle_decision(approval: Approval, decision: str, actor: Actor | None = None, comment: str = "") -> bool:
    """Move a pending approval to ``decision`` (by ``actor``, saying ``comment``); False when it was no
    longer pending (someone decided meanwhile)."""
    fields: dict[str, Any] = {"decision": decision, "decided_at": clock.now()}
    if actor is not None:
        fields.update(decided_by_id=actor.user_id, decided_by_name=actor.user_name, comment=comment)
    return bool(Approval.objects.filter(pk=approval.pk, decision=ApprovalDecision.PENDING).update(**fields))


def _ask_again(approval: Approval, children: list[ChangeRequest], moved: list[str], actor: Actor) -> str:
    """Supersede ``approval``: rebase the changes on the snapshot, cancel those that no longer apply, and
    ask for a new decision on the rest. The message for whoever tried to decide."""
    _settle_decision(approval, ApprovalDecision.SUPERSEDED)
    namespaces = {ns.name: ns for ns in namespaces_of(children)}
    kept = []
    for change in children:
        why = rebase(change, namespaces.get(change.namespace))
        if why:
            finish([change], ChangeState.CANCELLED, why, [ChangeState.AWAITING_APPROVAL, ChangeState.SCHEDULED])
            record(
                system_actor(),
                AuditAction.CANCELLED,
                change.namespace,
                outcome=ChangeState.CANCELLED,
                change=change,
                message=f"change #{change.pk} cancelled: {why}",
            )
        else:
            kept.append(change)
    shown = ", ".join(sorted(moved)[:5])
    if not kept:
        notify.resolve_alert(notify.approval_key(approval.change_id, approval.bulk_id))
        return f"the namespace changed since the approval was asked ({shown}): the change no longer applies"
    reasons = [approval.reason]
    if approval.change_id is not None:
        namespace = namespaces.get(kept[0].namespace)
        destructive = is_destructive(namespace, kept[0].action, kept[0].desired_spec) if namespace else None
        reasons = [f"a destructive change needs a second person's approval: {destructive}"] if destructive else reasons
    message = (
        f"the offloading of {shown} changed since the approval was asked: the change is now based on it and "
        "awaits a new decision"
    )
    single = kept[0] if approval.change_id is not None else None
    bulk = BulkRequest.objects.filter(pk=approval.bulk_id).first() if approval.bulk_id else None
    for waiting in kept:
        ChangeRequest.objects.filter(pk=waiting.pk).update(
            state=ChangeState.AWAITING_APPROVAL, updated_at=timezone.now()
        )
        waiting.state = ChangeState.AWAITING_APPROVAL
    request_approval(
        actor, change=single, bulk=bulk, children=kept, reason=reasons[0], impact=approval.impact, message=message
    )
    return message


def expire(approval: Approval, children: list[ChangeRequest]) -> None:
    if not _settle_decision(approval, ApprovalDecision.EXPIRED):
        return
    message = f"nobody approved it before {at_text(approval.expires_at)}: ask again if it is still needed"
    moved = finish(children, ChangeState.EXPIRED, message, [ChangeState.AWAITING_APPROVAL])
    for change in children:
        if change.pk in moved:
            record(
                requester_of(change),
                AuditAction.EXPIRED,
                change.namespace,
                outcome=ChangeState.EXPIRED,
                change=change,
                after={"approval": approval.pk},
                message=f"the approval request of change #{change.pk} expired: {message}",
            )
    notify.resolve_alert(notify.approval_key(approval.change_id, approval.bulk_id))


def _release(changes: list[ChangeRequest], actor: Actor, bulk_id: int | None) -> None:
    """Queue each change whose window is open now; schedule the others (a bulk's spread)."""
    now = clock.now()
    queued: list[ChangeRequest] = []
    later: list[ChangeRequest] = []
    managed = changes[0].managed_id if changes else None  # one change's or bulk's: one cluster
    cluster = policy_cluster_name(managed)  # its windows only
    for change in changes:
        found = policy.windows_of(change.namespace, labels_of(change.namespace, change.managed_id), cluster)
        (queued if windows.is_open(found, now) else later).append(change)
    for change in queued:
        if ChangeRequest.objects.filter(pk=change.pk, state__in=WAITING).update(
            state=ChangeState.QUEUED, updated_at=timezone.now(), message=""
        ):
            change.state = ChangeState.QUEUED
            Schedule.objects.filter(change=change, released_at__isnull=True).update(released_at=now)
    for change in later:
        ChangeRequest.objects.filter(pk=change.pk, state__in=WAITING).update(
            state=ChangeState.SCHEDULED, updated_at=timezone.now()
        )
        change.state = ChangeState.SCHEDULED
    if bulk_id is not None and later:
        schedule_spread(later, actor)
    else:
        for change in later:
            decided = window_gate(change.namespace, labels_of(change.namespace, change.managed_id), now, cluster)
            schedule_change(change, actor, decided.not_before, decided.window)
    _enqueue([c.pk for c in queued if c.state == ChangeState.QUEUED], bulk_id, managed)


def _enqueue(ids: list[int], bulk_id: int | None, managed: int | None) -> None:
    """Send the released changes, once the transaction commits, to their cluster's queue: one bulk task
    for several children of a bulk, else one apply each."""
    if not ids:
        return
    route = queue_of(managed)  # the default cluster's: sent as before (no queue named)
    if bulk_id is not None and len(ids) > 1:
        bulk = partial(enqueue_bulk, bulk_id) if route is None else partial(enqueue_bulk, bulk_id, managed=route)
        transaction.on_commit(bulk, robust=True)
    else:
        for pk in ids:
            one = partial(enqueue_apply, pk) if route is None else partial(enqueue_apply, pk, managed=route)
            transaction.on_commit(one, robust=True)


def _decide(
    actor: Actor, verb: str, change_id: int | None, bulk_id: int | None, managed: int | None
) -> tuple[Approval, list[ChangeRequest]]:
    """The common checks of approve and reject, in order: the subject exists (in cluster ``managed``
    when given; 404), the decider has the rights on its namespaces in its cluster (403), it awaits a
    decision (409), the decider is not the requester (403), it has not expired (then it is expired now,
    and 409)."""
    user = _check_rights(actor, _subject(change_id, bulk_id, managed), verb)
    approval, children = _pending(change_id, bulk_id)
    own = _own(approval, user)
    if own:
        raise _refuse(actor, children, verb, own)
    if _expired_now(approval):
        with transaction.atomic():
            expire(approval, children)
        raise Refused(
            409, f"the approval request expired at {at_text(approval.expires_at)}: it can no longer be decided"
        )
    return approval, children


def approve(
    actor: Actor,
    *,
    change_id: int | None = None,
    bulk_id: int | None = None,
    comment: str = "",
    managed: int | None = None,
) -> Approval:
    """Approve a change (or a whole bulk): it is queued, or scheduled for its window. Raises Refused.
    ``managed``: the cluster the step is asked in (see :func:`_subject`)."""
    approval, children = _decide(actor, "approve", change_id, bulk_id, managed)
    moved = _changed(approval, children)
    if moved:
        with transaction.atomic():
            message = _ask_again(approval, children, moved, actor)
        raise Refused(409, message[:1].upper() + message[1:])
    with transaction.atomic():
        decided = _settle_decision(approval, ApprovalDecision.APPROVED, actor, comment)
        if not decided:
            raise Refused(409, "this approval request was decided by someone else meanwhile")
        for change in children:
            record(
                actor,
                AuditAction.APPROVED,
                change.namespace,
                outcome="approved",
                change=change,
                after={"approval": approval.pk, "specHash": approval.spec_hash}
                | ({"bulk": approval.bulk_id} if approval.bulk_id else {}),
                message=f"change #{change.pk} approved by {actor.user_name}"
                + (f" (asked by {change.requester_name})" if change.requester_name else "")
                + (f": {comment}" if comment else ""),
            )
        _release(children, actor, approval.bulk_id)
        notify.resolve_alert(notify.approval_key(approval.change_id, approval.bulk_id))
    approval.refresh_from_db()
    return approval


def reject(
    actor: Actor,
    *,
    change_id: int | None = None,
    bulk_id: int | None = None,
    comment: str = "",
    managed: int | None = None,
) -> Approval:
    """Reject a change (or a whole bulk) with a comment (mandatory): it ends ``rejected``."""
    if not comment.strip():
        raise Refused(400, "say why the change is rejected (a comment is required)", "comment")
    approval, children = _decide(actor, "reject", change_id, bulk_id, managed)
    with transaction.atomic():
        if not _settle_decision(approval, ApprovalDecision.REJECTED, actor, comment):
            raise Refused(409, "this approval request was decided by someone else meanwhile")
        message = f"rejected by {actor.user_name}: {comment}"
        moved = finish(children, ChangeState.REJECTED, message, [ChangeState.AWAITING_APPROVAL])
        for change in children:
            if change.pk in moved:
                record(
                    actor,
                    AuditAction.REJECTED,
                    change.namespace,
                    outcome=ChangeState.REJECTED,
                    change=change,
                    after={"approval": approval.pk},
                    message=f"change #{change.pk} {message}",
                )
        notify.resolve_alert(notify.approval_key(approval.change_id, approval.bulk_id))
    approval.refresh_from_db()
    return approval


def _waiting(change_id: int | None, bulk_id: int | None) -> tuple[list[ChangeRequest], Approval | None, str]:
    if bulk_id is not None:
        bulk = BulkRequest.objects.filter(pk=bulk_id).first()
        if bulk is None:
            raise Refused(404, f"bulk request {bulk_id} does not exist", "bulk")
        changes = list(bulk.changes.filter(state__in=WAITING).order_by("id"))
        approval = Approval.objects.filter(bulk=bulk, decision=ApprovalDecision.PENDING).order_by("-id").first()
        what = f"bulk #{bulk_id}"
    else:
        change = ChangeRequest.objects.filter(pk=change_id or 0).first()
        if change is None:
            raise Refused(404, f"change {change_id} does not exist")
        changes = [change] if change.state in WAITING else []
        approval = Approval.objects.filter(change=change, decision=ApprovalDecision.PENDING).order_by("-id").first()
        if approval is None and change.bulk_id is not None and change.state == ChangeState.AWAITING_APPROVAL:
            approval = (
                Approval.objects.filter(bulk_id=change.bulk_id, decision=ApprovalDecision.PENDING)
                .order_by("-id")
                .first()
            )
        what = f"change #{change_id}"
        if not changes:
            raise Refused(
                409, f"{what} is {change.get_state_display().lower()}: only a waiting change can be changed so"
            )
    if not changes:
        raise Refused(409, f"{what} has no waiting change")
    return changes, approval, what


def cancel(
    actor: Actor,
    *,
    change_id: int | None = None,
    bulk_id: int | None = None,
    comment: str = "",
    managed: int | None = None,
) -> int:
    """Cancel waiting changes (awaiting approval or scheduled): the requester, or anyone who may change
    the namespaces. Returns how many were cancelled."""
    subject = _subject(change_id, bulk_id, managed)
    user = _person(actor)
    if any(c.requester_id != user.pk for c in subject):
        _check_rights(actor, [c for c in subject if c.requester_id != user.pk], "cancel")
    changes, approval, what = _waiting(change_id, bulk_id)
    with transaction.atomic():
        message = f"cancelled by {actor.user_name}" + (f": {comment}" if comment else "")
        moved = finish(changes, ChangeState.CANCELLED, message, WAITING)
        if approval is not None and (bulk_id is not None or approval.change_id is not None):
            _settle_decision(approval, ApprovalDecision.CANCELLED, actor, comment)
            notify.resolve_alert(notify.approval_key(approval.change_id, approval.bulk_id))
        for change in changes:
            if change.pk in moved:
                record(
                    actor,
                    AuditAction.CANCELLED,
                    change.namespace,
                    outcome=ChangeState.CANCELLED,
                    change=change,
                    message=f"change #{change.pk} {message}",
                )
    if not moved:
        raise Refused(409, f"{what} was decided meanwhile: nothing was cancelled")
    return len(moved)


def break_glass(
    actor: Actor,
    *,
    change_id: int | None = None,
    bulk_id: int | None = None,
    reason: str = "",
    managed: int | None = None,
) -> int:
    """An admin applies waiting changes now, without approval and outside their windows; ``reason`` is
    mandatory. Audited ``broke_glass`` and alerted. Returns how many were queued."""
    subject = _subject(change_id, bulk_id, managed)
    user = _check_rights(actor, subject, "break glass")
    if roles.role_of(user) != roles.ADMIN:
        raise _refuse(actor, subject, "break glass", f"only admins may break glass (your role: {roles.role_of(user)})")
    if not reason.strip():
        raise Refused(400, "breaking glass needs a reason: say why this change cannot wait", "reason")
    changes, approval, what = _waiting(change_id, bulk_id)
    with transaction.atomic():
        # One child of a bulk breaks glass alone: the bulk's approval still waits for the others.
        if approval is not None and (bulk_id is not None or approval.change_id is not None):
            _settle_decision(approval, ApprovalDecision.BROKE_GLASS, actor, reason)
            notify.resolve_alert(notify.approval_key(approval.change_id, approval.bulk_id))
        queued = []
        for change in changes:
            was = change.state
            if ChangeRequest.objects.filter(pk=change.pk, state__in=WAITING).update(
                state=ChangeState.QUEUED, updated_at=timezone.now(), message=f"break glass by {actor.user_name}"
            ):
                queued.append(change.pk)
                Schedule.objects.filter(change=change, released_at__isnull=True).update(released_at=clock.now())
                record(
                    actor,
                    AuditAction.BROKE_GLASS,
                    change.namespace,
                    outcome=ChangeState.QUEUED,
                    change=change,
                    after={"was": was, "reason": reason},
                    message=f"{actor.user_name} broke glass on change #{change.pk} ({was.replace('_', ' ')}): {reason}",
                )
        if not queued:
            raise Refused(409, f"{what} was decided meanwhile: nothing to break glass on")
        names = sorted({c.namespace for c in changes if c.pk in queued})
        cluster = changes[0].managed_id  # one change's or bulk's: one cluster
        notify.open_alert(
            f"broke-glass:{'bulk-' + str(bulk_id) if bulk_id else 'change-' + str(change_id)}",
            notify.KIND_BROKE_GLASS,
            "critical",
            f"{actor.user_name} broke glass on {what} ({', '.join(names[:5])})",
            f"Applied without approval or outside its change window. Reason: {reason}",
            page_path("bulk_detail", cluster, bulk_id) if bulk_id else change_path(changes[0]),
            names[0] if len(names) == 1 else "",
            cluster,
        )
        _enqueue(queued, bulk_id, cluster)
    return len(queued)


# --------------------------------------------------------------------------------------------------
# Reads for the pages and the API


def awaiting(user: Any, managed: int | None = None) -> list[Approval]:
    """The approval requests ``user`` may decide on now (not their own, in their rights in the change's
    cluster), oldest first; of managed cluster ``managed`` (pk) when given (a page's or an API path's),
    else of every cluster."""
    found = []
    pending = Approval.objects.filter(decision=ApprovalDecision.PENDING)
    if managed is not None:
        pending = pending.of(managed)
    pending = pending.select_related("change__managed", "bulk__managed").order_by("id")
    for approval in pending:
        if approval.bulk_id is not None:
            children = list(ChangeRequest.objects.filter(bulk_id=approval.bulk_id, state=ChangeState.AWAITING_APPROVAL))
        else:
            children = (
                [approval.change] if approval.change and approval.change.state == ChangeState.AWAITING_APPROVAL else []
            )
        if children and not may_decide(user, approval, children):
            found.append(approval)
    return found
