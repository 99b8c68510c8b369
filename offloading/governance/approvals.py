"""Four-eyes approval and change windows of recorded changes: the decisions and the beat's work.

The rules:

- **Who waits.** ``offloading.changes.requests`` asks :func:`gate` before it records a change: a change
  the policy (``offloading.governance.policy``) says needs a second person is recorded
  ``awaiting_approval``; else a change outside its scope's change window is recorded ``scheduled``, to be
  released when the window opens; else it is queued as before. :func:`hold` then writes the approval
  request or the schedule, the audit rows and the notification, in the same transaction. A bulk is
  asked once for all its namespaces (:func:`gate_bulk`): one approval for the whole bulk, with its impact.
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
- **Expiry.** A request not decided within APPROVAL_TTL (24 h) expires (beat: :func:`expire_due`).
- **Windows.** An approved change outside its window is scheduled for the next opening; a scheduled
  bulk spreads over the first half of its window (``offloading.governance.windows.spread``); the beat
  releases what is due (:func:`release_due`). A waiting change may be cancelled (the requester, or anyone
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

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from access import policy as access_policy
from access import roles
from liqo_rules.spec import normalize_spec
from offloading.audit.events import record, record_refused, requester_of
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.context import Actor, new_request_id
from offloading.governance import clock, notify, policy, windows
from offloading.models import Approval, ApprovalDecision, BulkRequest, ChangeRequest, Namespace, Schedule
from offloading.queue import enqueue_apply, enqueue_bulk
from offloading.whatif.destructive import destructive_changes, is_destructive

log = logging.getLogger(__name__)

WAITING = (ChangeState.AWAITING_APPROVAL, ChangeState.SCHEDULED)


class Refused(Exception):
    """A governance step that cannot be taken: ``code`` is the HTTP status (400, 403, 404, 409),
    ``field`` the field the message belongs to."""

    def __init__(self, code: int, message: str, field: str = "change") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


# --------------------------------------------------------------------------------------------------
# Facts


def change_hash(change: ChangeRequest) -> str:
    """The hash of a change as an approver sees it."""
    body = {
        "namespace": change.namespace,
        "action": change.action,
        "desired": normalize_spec(change.desired_spec) if change.desired_spec else None,
        "base": normalize_spec(change.base_spec) if change.base_spec else None,
        "label": bool(change.label_namespace),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def version_of(namespace: Namespace | None) -> dict[str, Any]:
    """The snapshot's version of a namespace's offloading, as an approval keeps it."""
    if namespace is None or not namespace.offloaded:
        return {"offloaded": False}
    spec = normalize_spec(namespace.offloading_spec or {})
    return {
        "offloaded": True,
        "uid": namespace.offloading_uid,
        "generation": namespace.offloading_generation,
        "spec": hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest(),
        "resourceVersion": namespace.offloading_resource_version,
    }


def _same_version(seen: dict[str, Any], now: dict[str, Any]) -> bool:
    keys = ("offloaded", "uid", "generation", "spec")
    return all(seen.get(k) == now.get(k) for k in keys)


def _labels(name: str) -> dict[str, str]:
    return Namespace.objects.filter(name=name).values_list("labels", flat=True).first() or {}


def _policy_action(change: ChangeRequest) -> str:
    return {ChangeAction.UNOFFLOAD: "unoffload", ChangeAction.UPDATE: "edit"}.get(
        ChangeAction(change.action), "offload"
    )


def _change_path(change: ChangeRequest) -> str:
    return reverse("offloading:change_detail", args=[change.pk])


def _bulk_path(bulk: BulkRequest) -> str:
    return reverse("offloading:bulk_detail", args=[bulk.pk])


def _system() -> Actor:
    return Actor(None, "system", Source.TASK, new_request_id())


def _at(value: datetime) -> str:
    return value.astimezone(timezone.get_current_timezone()).strftime("%Y-%m-%d %H:%M %Z")


# --------------------------------------------------------------------------------------------------
# Recording: what requests.py asks


@dataclass
class Gate:
    """What happens to a change being recorded: its state, why it needs approval, when it may apply."""

    state: str = ChangeState.QUEUED
    reason: str = ""
    not_before: datetime | None = None
    window: str = ""

    @property
    def enqueue(self) -> bool:
        return self.state == ChangeState.QUEUED


def _window_gate(name: str, labels: dict[str, str] | None, at: datetime) -> Gate:
    found = policy.windows_of(name, labels)
    if windows.is_open(found, at):
        return Gate()
    return Gate(
        ChangeState.SCHEDULED,
        not_before=windows.next_opening(found, at),
        window=" | ".join(str(w) for w in found),
    )


def gate(namespace: Namespace, change: ChangeRequest) -> Gate:
    """Whether ``change`` (unsaved, of ``namespace``) waits for approval or for its window; sets its state."""
    result = Gate()
    if policy.approval_mode(namespace.name, namespace.labels) != policy.NONE:
        destructive = is_destructive(namespace, change.action, change.desired_spec)
        reason = policy.approval_reason(namespace.name, namespace.labels, destructive)
        if reason:
            result = Gate(ChangeState.AWAITING_APPROVAL, reason)
    if result.enqueue:
        result = _window_gate(namespace.name, namespace.labels, clock.now())
    change.state = result.state
    return result


@dataclass
class BulkGate:
    reason: str = ""
    children: dict[str, Gate] = field(default_factory=dict)  # by namespace, when no approval is needed
    impact: dict[str, Any] = field(default_factory=dict)

    @property
    def enqueue(self) -> bool:
        return not self.reason and any(g.enqueue for g in self.children.values())


def gate_bulk(changes: list[ChangeRequest]) -> BulkGate:
    """One decision for the children of a bulk (unsaved): all of them await one approval when one of
    them needs it; else each waits for its own window or is queued. Sets their states."""
    labels = dict(Namespace.objects.filter(name__in=[c.namespace for c in changes]).values_list("name", "labels"))
    destructive: dict[str, str] | None = None
    needing: dict[str, str] = {}
    for change in changes:
        mode = policy.approval_mode(change.namespace, labels.get(change.namespace))
        if mode == policy.NONE:
            continue
        if destructive is None:
            destructive = destructive_changes(changes)
        why = policy.approval_reason(change.namespace, labels.get(change.namespace), destructive.get(change.namespace))
        if why:
            needing[change.namespace] = why
    if needing:
        names = sorted(needing)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        result = BulkGate(reason=f"this bulk change needs a second person's approval for {shown}")
        result.impact = {
            "namespaces": sorted(c.namespace for c in changes),
            "needsApproval": needing,
            "destructive": destructive or {},
        }
        for change in changes:
            change.state = ChangeState.AWAITING_APPROVAL
        return result
    result = BulkGate()
    now = clock.now()
    for change in changes:
        result.children[change.namespace] = _window_gate(change.namespace, labels.get(change.namespace), now)
        change.state = result.children[change.namespace].state
    return result


def _request_approval(
    actor: Actor,
    *,
    change: ChangeRequest | None,
    bulk: BulkRequest | None,
    children: list[ChangeRequest],
    reason: str,
    impact: dict[str, Any] | None = None,
    message: str = "",
) -> Approval:
    now = clock.now()
    versions = {ns.name: version_of(ns) for ns in Namespace.objects.filter(name__in=[c.namespace for c in children])}
    subject = change if change is not None else bulk
    assert subject is not None
    approval = Approval.objects.create(
        change=change,
        bulk=bulk,
        reason=reason,
        impact=impact or {},
        requester_id=subject.requester_id,
        requester_name=subject.requester_name,
        requested_at=now,
        expires_at=now + policy.approval_ttl(),
        spec_hash=_hash_of(children),
        seen={c.namespace: versions.get(c.namespace, {"offloaded": False}) for c in children},
    )
    what = f"change #{change.pk}" if change is not None else f"bulk #{bulk.pk if bulk else ''}"
    text = message or f"{what} awaits a second person's approval until {_at(approval.expires_at)}: {reason}"
    record(
        actor,
        AuditAction.APPROVAL_REQUESTED,
        change.namespace if change is not None else "",
        outcome=ChangeState.AWAITING_APPROVAL,
        change=change,
        after={"approval": approval.pk, "expiresAt": approval.expires_at.isoformat(), "specHash": approval.spec_hash}
        | ({"bulk": bulk.pk, "impact": approval.impact} if bulk is not None else {}),
        message=text,
    )
    title = (
        f"Change #{change.pk} ({change.get_action_display().lower()} {change.namespace}, asked by "
        f"{change.requester_name}) awaits approval"
        if change is not None
        else f"Bulk #{bulk.pk if bulk else ''} ({len(children)} namespaces, asked by {approval.requester_name}) "
        "awaits approval"
    )
    notify.open_alert(
        notify.approval_key(change.pk if change else None, bulk.pk if bulk else None),
        notify.KIND_APPROVAL,
        "warning",
        title,
        f"{reason}. Approve or reject it before {_at(approval.expires_at)}.",
        reverse("offloading:governance_approvals"),
        change.namespace if change is not None else "",
    )
    return approval


def _hash_of(children: Iterable[ChangeRequest]) -> str:
    hashes = sorted(change_hash(c) for c in children)
    return hashes[0] if len(hashes) == 1 else hashlib.sha256("".join(hashes).encode()).hexdigest()


def _schedule(change: ChangeRequest, actor: Actor, not_before: datetime | None, window: str) -> None:
    when = not_before or clock.now()
    Schedule.objects.update_or_create(
        change=change, defaults={"not_before": when, "window": window, "scheduled_at": clock.now(), "released_at": None}
    )
    record(
        actor,
        AuditAction.SCHEDULED,
        change.namespace,
        outcome=ChangeState.SCHEDULED,
        change=change,
        after={"notBefore": when.isoformat(), "window": window},
        message=f"change #{change.pk} is outside its change window ({window}): it applies at {_at(when)}",
    )


def hold(change: ChangeRequest, decided: Gate, actor: Actor) -> None:
    """After ``change`` was saved with the state of ``decided`` (same transaction): its approval request
    or its schedule, audited and notified."""
    if decided.state == ChangeState.AWAITING_APPROVAL:
        _request_approval(actor, change=change, bulk=None, children=[change], reason=decided.reason)
    elif decided.state == ChangeState.SCHEDULED:
        _schedule(change, actor, decided.not_before, decided.window)


def hold_bulk(bulk: BulkRequest, changes: list[ChangeRequest], decided: BulkGate, actor: Actor) -> None:
    """:func:`hold` for the saved children of a bulk."""
    if decided.reason:
        _request_approval(actor, change=None, bulk=bulk, children=changes, reason=decided.reason, impact=decided.impact)
        return
    _schedule_spread([c for c in changes if c.state == ChangeState.SCHEDULED], actor)


def _schedule_spread(changes: list[ChangeRequest], actor: Actor) -> None:
    """Schedule changes of a bulk, each group of namespaces sharing windows spread within them."""
    groups: dict[str, list[ChangeRequest]] = {}
    for change in changes:
        found = policy.windows_of(change.namespace, _labels(change.namespace))
        groups.setdefault(" | ".join(str(w) for w in found), []).append(change)
    now = clock.now()
    for text, members in groups.items():
        found = policy.windows_of(members[0].namespace, _labels(members[0].namespace))
        for change, when in zip(members, windows.spread(found, now, len(members)), strict=True):
            _schedule(change, actor, when, text)


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


def _subject(change_id: int | None, bulk_id: int | None) -> list[ChangeRequest]:
    """Every change of the change or bulk a step is about (404 when there is none)."""
    if bulk_id is not None:
        if not BulkRequest.objects.filter(pk=bulk_id).exists():
            raise Refused(404, f"bulk request {bulk_id} does not exist", "bulk")
        return list(ChangeRequest.objects.filter(bulk_id=bulk_id).order_by("id"))
    change = ChangeRequest.objects.filter(pk=change_id or 0).first()
    if change is None:
        raise Refused(404, f"change {change_id} does not exist")
    return [change]


def rights_reason(user: Any, changes: list[ChangeRequest]) -> str:
    """Why ``user`` may not make ``changes`` themselves ("" when they may): the rule of asking for them
    (``access.policy.can_change``, as ``offloading.changes.authorize.permit`` applies it)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return "you are not logged in"
    labels = dict(Namespace.objects.filter(name__in=[c.namespace for c in changes]).values_list("name", "labels"))
    for change in changes:
        decision = access_policy.can_change(
            user, change.namespace, labels.get(change.namespace), _policy_action(change)
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
    record_refused(actor, changes[0].namespace if len(changes) == 1 else "", verb, reason)
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
    current = {ns.name: version_of(ns) for ns in Namespace.objects.filter(name__in=[c.namespace for c in children])}
    moved = [
        c.namespace
        for c in children
        if not _same_version(approval.seen.get(c.namespace, {}), current.get(c.namespace, {"offloaded": False}))
    ]
    if not moved and _hash_of(children) != approval.spec_hash:
        moved = [c.namespace for c in children]
    return moved


def _finish(changes: Iterable[ChangeRequest], state: str, message: str, from_states: Iterable[str]) -> list[int]:
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


def _rebase(change: ChangeRequest, namespace: Namespace | None) -> str:
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


def _ask_again(approval: Approval, children: list[ChangeRequest], moved: list[str], actor: Actor) -> str:
    """Supersede ``approval``: rebase the changes on the snapshot, cancel those that no longer apply, and
    ask for a new decision on the rest. The message for whoever tried to decide."""
    Approval.objects.filter(pk=approval.pk, decision=ApprovalDecision.PENDING).update(
        decision=ApprovalDecision.SUPERSEDED, decided_at=clock.now()
    )
    namespaces = {ns.name: ns for ns in Namespace.objects.filter(name__in=[c.namespace for c in children])}
    kept = []
    for change in children:
        why = _rebase(change, namespaces.get(change.namespace))
        if why:
            _finish([change], ChangeState.CANCELLED, why, [ChangeState.AWAITING_APPROVAL, ChangeState.SCHEDULED])
            record(
                _system(),
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
    _request_approval(
        actor, change=single, bulk=bulk, children=kept, reason=reasons[0], impact=approval.impact, message=message
    )
    return message


def _expire(approval: Approval, children: list[ChangeRequest]) -> None:
    if not Approval.objects.filter(pk=approval.pk, decision=ApprovalDecision.PENDING).update(
        decision=ApprovalDecision.EXPIRED, decided_at=clock.now()
    ):
        return
    message = f"nobody approved it before {_at(approval.expires_at)}: ask again if it is still needed"
    moved = _finish(children, ChangeState.EXPIRED, message, [ChangeState.AWAITING_APPROVAL])
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
    for change in changes:
        found = policy.windows_of(change.namespace, _labels(change.namespace))
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
        _schedule_spread(later, actor)
    else:
        for change in later:
            decided = _window_gate(change.namespace, _labels(change.namespace), now)
            _schedule(change, actor, decided.not_before, decided.window)
    ids = [c.pk for c in queued if c.state == ChangeState.QUEUED]
    if not ids:
        return
    if bulk_id is not None and len(ids) > 1:
        transaction.on_commit(lambda: enqueue_bulk(bulk_id), robust=True)
    else:
        for pk in ids:
            transaction.on_commit(partial(enqueue_apply, pk), robust=True)


def _decide(
    actor: Actor, verb: str, change_id: int | None, bulk_id: int | None, comment: str
) -> tuple[Approval, list[ChangeRequest]]:
    """The common checks of approve and reject, in order: the subject exists (404), the decider has the
    rights on its namespaces (403), it awaits a decision (409), the decider is not the requester (403),
    it has not expired (then it is expired now, and 409)."""
    user = _check_rights(actor, _subject(change_id, bulk_id), verb)
    approval, children = _pending(change_id, bulk_id)
    own = _own(approval, user)
    if own:
        raise _refuse(actor, children, verb, own)
    if _expired_now(approval):
        with transaction.atomic():
            _expire(approval, children)
        raise Refused(409, f"the approval request expired at {_at(approval.expires_at)}: it can no longer be decided")
    return approval, children


def approve(actor: Actor, *, change_id: int | None = None, bulk_id: int | None = None, comment: str = "") -> Approval:
    """Approve a change (or a whole bulk): it is queued, or scheduled for its window. Raises Refused."""
    approval, children = _decide(actor, "approve", change_id, bulk_id, comment)
    moved = _changed(approval, children)
    if moved:
        with transaction.atomic():
            message = _ask_again(approval, children, moved, actor)
        raise Refused(409, message[:1].upper() + message[1:])
    with transaction.atomic():
        decided = Approval.objects.filter(pk=approval.pk, decision=ApprovalDecision.PENDING).update(
            decision=ApprovalDecision.APPROVED,
            decided_by_id=actor.user_id,
            decided_by_name=actor.user_name,
            decided_at=clock.now(),
            comment=comment,
        )
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


def reject(actor: Actor, *, change_id: int | None = None, bulk_id: int | None = None, comment: str = "") -> Approval:
    """Reject a change (or a whole bulk) with a comment (mandatory): it ends ``rejected``."""
    if not comment.strip():
        raise Refused(400, "say why the change is rejected (a comment is required)", "comment")
    approval, children = _decide(actor, "reject", change_id, bulk_id, comment)
    with transaction.atomic():
        if not Approval.objects.filter(pk=approval.pk, decision=ApprovalDecision.PENDING).update(
            decision=ApprovalDecision.REJECTED,
            decided_by_id=actor.user_id,
            decided_by_name=actor.user_name,
            decided_at=clock.now(),
            comment=comment,
        ):
            raise Refused(409, "this approval request was decided by someone else meanwhile")
        message = f"rejected by {actor.user_name}: {comment}"
        moved = _finish(children, ChangeState.REJECTED, message, [ChangeState.AWAITING_APPROVAL])
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


def cancel(actor: Actor, *, change_id: int | None = None, bulk_id: int | None = None, comment: str = "") -> int:
    """Cancel waiting changes (awaiting approval or scheduled): the requester, or anyone who may change
    the namespaces. Returns how many were cancelled."""
    subject = _subject(change_id, bulk_id)
    user = _person(actor)
    if any(c.requester_id != user.pk for c in subject):
        _check_rights(actor, [c for c in subject if c.requester_id != user.pk], "cancel")
    changes, approval, what = _waiting(change_id, bulk_id)
    with transaction.atomic():
        message = f"cancelled by {actor.user_name}" + (f": {comment}" if comment else "")
        moved = _finish(changes, ChangeState.CANCELLED, message, WAITING)
        if approval is not None and (bulk_id is not None or approval.change_id is not None):
            Approval.objects.filter(pk=approval.pk, decision=ApprovalDecision.PENDING).update(
                decision=ApprovalDecision.CANCELLED,
                decided_by_id=actor.user_id,
                decided_by_name=actor.user_name,
                decided_at=clock.now(),
                comment=comment,
            )
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


def break_glass(actor: Actor, *, change_id: int | None = None, bulk_id: int | None = None, reason: str = "") -> int:
    """An admin applies waiting changes now, without approval and outside their windows; ``reason`` is
    mandatory. Audited ``broke_glass`` and alerted. Returns how many were queued."""
    subject = _subject(change_id, bulk_id)
    user = _check_rights(actor, subject, "break glass")
    if roles.role_of(user) != roles.ADMIN:
        raise _refuse(actor, subject, "break glass", f"only admins may break glass (your role: {roles.role_of(user)})")
    if not reason.strip():
        raise Refused(400, "breaking glass needs a reason: say why this change cannot wait", "reason")
    changes, approval, what = _waiting(change_id, bulk_id)
    with transaction.atomic():
        if approval is not None:
            Approval.objects.filter(pk=approval.pk, decision=ApprovalDecision.PENDING).update(
                decision=ApprovalDecision.BROKE_GLASS,
                decided_by_id=actor.user_id,
                decided_by_name=actor.user_name,
                decided_at=clock.now(),
                comment=reason,
            )
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
        notify.open_alert(
            f"broke-glass:{'bulk-' + str(bulk_id) if bulk_id else 'change-' + str(change_id)}",
            notify.KIND_BROKE_GLASS,
            "critical",
            f"{actor.user_name} broke glass on {what} ({', '.join(names[:5])})",
            f"Applied without approval or outside its change window. Reason: {reason}",
            _bulk_path(BulkRequest(pk=bulk_id)) if bulk_id else _change_path(changes[0]),
            names[0] if len(names) == 1 else "",
        )
        if bulk_id is not None and len(queued) > 1:
            transaction.on_commit(lambda: enqueue_bulk(bulk_id), robust=True)
        else:
            for pk in queued:
                transaction.on_commit(partial(enqueue_apply, pk), robust=True)
    return len(queued)


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
            _expire(approval, children)
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
            found = policy.windows_of(change.namespace, _labels(change.namespace))
            if not windows.is_open(found, now):
                later = windows.next_opening(found, now) or now
                Schedule.objects.filter(pk=schedule.pk).update(not_before=later)
                continue
            if ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.SCHEDULED).update(
                state=ChangeState.QUEUED, updated_at=timezone.now(), message=""
            ):
                Schedule.objects.filter(pk=schedule.pk).update(released_at=now)
                transaction.on_commit(partial(enqueue_apply, change.pk), robust=True)
                released += 1
    return released


def _changed_one(approval: Approval, change: ChangeRequest) -> list[str]:
    namespace = Namespace.objects.filter(name=change.namespace).first()
    seen = approval.seen.get(change.namespace, {})
    if not _same_version(seen, version_of(namespace)):
        return [change.namespace]
    if approval.change_id is not None and change_hash(change) != approval.spec_hash:
        return [change.namespace]
    return []


def _ask_again_one(reason: str, change: ChangeRequest) -> None:
    """A released change whose namespace moved since its approval: rebased, and a new approval of its own."""
    ChangeRequest.objects.filter(pk=change.pk).update(state=ChangeState.AWAITING_APPROVAL, updated_at=timezone.now())
    change.state = ChangeState.AWAITING_APPROVAL
    why = _rebase(change, Namespace.objects.filter(name=change.namespace).first())
    if why:
        _finish([change], ChangeState.CANCELLED, why, [ChangeState.AWAITING_APPROVAL])
        record(
            _system(),
            AuditAction.CANCELLED,
            change.namespace,
            outcome=ChangeState.CANCELLED,
            change=change,
            message=why,
        )
        return
    _request_approval(
        _system(),
        change=change,
        bulk=None,
        children=[change],
        reason=reason,
        message=f"the offloading of {change.namespace} changed since change #{change.pk} was approved: "
        "it is now based on it and awaits a new decision",
    )


# --------------------------------------------------------------------------------------------------
# Reads for the pages and the API


def awaiting(user: Any) -> list[Approval]:
    """The approval requests ``user`` may decide on now (not their own, in their rights), oldest first."""
    found = []
    pending = Approval.objects.filter(decision=ApprovalDecision.PENDING).select_related("change", "bulk").order_by("id")
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


def current_approval(change: ChangeRequest) -> Approval | None:
    """The approval that counts for ``change`` (its own newest, else its bulk's), or None."""
    own = Approval.objects.filter(change=change).order_by("-id").first()
    if own is None and change.bulk_id is not None:
        return Approval.objects.filter(bulk_id=change.bulk_id).order_by("-id").first()
    return own
