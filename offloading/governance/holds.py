"""Recording a change that waits (issue 29): what ``offloading.changes.requests`` and ``bulk`` ask before
they record a change (:func:`gate`, :func:`gate_bulk`: awaiting approval, scheduled for its window, or
queued) and what they write with it (:func:`hold`, :func:`hold_bulk`: the approval request or the
schedule, audited, and the approvers' alert). The rules are in ``offloading.governance.approvals``."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from offloading.audit.events import record
from offloading.choices import AuditAction, ChangeState
from offloading.context import Actor
from offloading.governance import clock, notify, policy, windows
from offloading.governance.facts import (
    at_text,
    change_hash,
    labels_of,
    namespaces_of,
    page_path,
    version_of,
)
from offloading.models import Approval, BulkRequest, ChangeRequest, Namespace, Schedule
from offloading.models.fleet import policy_cluster_name
from offloading.whatif.destructive import destructive_changes, is_destructive

log = logging.getLogger(__name__)

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


def window_gate(name: str, labels: dict[str, str] | None, at: datetime, cluster: str | None = None) -> Gate:
    """Whether a change of namespace ``name`` of managed cluster ``cluster`` (by name; None: the default)
    asked at ``at`` waits for its window."""
    found = policy.windows_of(name, labels, cluster)
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
    cluster = policy_cluster_name(namespace.managed_id)  # the rules of the namespace's cluster only
    if policy.approval_mode(namespace.name, namespace.labels, cluster) != policy.NONE:
        destructive = is_destructive(namespace, change.action, change.desired_spec)
        reason = policy.approval_reason(namespace.name, namespace.labels, destructive, cluster)
        if reason:
            result = Gate(ChangeState.AWAITING_APPROVAL, reason)
    if result.enqueue:
        result = window_gate(namespace.name, namespace.labels, clock.now(), cluster)
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
    labels = dict(namespaces_of(changes).values_list("name", "labels"))
    cluster = policy_cluster_name(changes[0].managed_id) if changes else None  # a bulk is of one cluster
    destructive: dict[str, str] | None = None
    needing: dict[str, str] = {}
    for change in changes:
        mode = policy.approval_mode(change.namespace, labels.get(change.namespace), cluster)
        if mode == policy.NONE:
            continue
        if destructive is None:
            destructive = destructive_changes(changes)
        why = policy.approval_reason(
            change.namespace, labels.get(change.namespace), destructive.get(change.namespace), cluster
        )
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
        result.children[change.namespace] = window_gate(change.namespace, labels.get(change.namespace), now, cluster)
        change.state = result.children[change.namespace].state
    return result


def request_approval(
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
    versions = {ns.name: version_of(ns) for ns in namespaces_of(children)}
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
        spec_hash=hash_of(children),
        # Per namespace: its version in the snapshot and the hash of its change, as the approver sees them.
        seen={
            c.namespace: {**versions.get(c.namespace, {"offloaded": False}), "change": change_hash(c)} for c in children
        },
    )
    what = f"change #{change.pk}" if change is not None else f"bulk #{bulk.pk if bulk else ''}"
    text = message or f"{what} awaits a second person's approval until {at_text(approval.expires_at)}: {reason}"
    managed = subject.managed_id  # a change's or a bulk's cluster: its trail, its alert, its Approvals page
    record(
        actor,
        AuditAction.APPROVAL_REQUESTED,
        change.namespace if change is not None else "",
        outcome=ChangeState.AWAITING_APPROVAL,
        change=change,
        managed=managed,
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
        f"{reason}. Approve or reject it before {at_text(approval.expires_at)}.",
        page_path("governance_approvals", managed),
        change.namespace if change is not None else "",
        managed,
    )
    return approval


def hash_of(children: Iterable[ChangeRequest]) -> str:
    hashes = sorted(change_hash(c) for c in children)
    return hashes[0] if len(hashes) == 1 else hashlib.sha256("".join(hashes).encode()).hexdigest()


def schedule_change(change: ChangeRequest, actor: Actor, not_before: datetime | None, window: str) -> None:
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
        message=f"change #{change.pk} is outside its change window ({window}): it applies at {at_text(when)}",
    )


def hold(change: ChangeRequest, decided: Gate, actor: Actor) -> None:
    """After ``change`` was saved with the state of ``decided`` (same transaction): its approval request
    or its schedule, audited and notified."""
    if decided.state == ChangeState.AWAITING_APPROVAL:
        request_approval(actor, change=change, bulk=None, children=[change], reason=decided.reason)
    elif decided.state == ChangeState.SCHEDULED:
        schedule_change(change, actor, decided.not_before, decided.window)


def hold_bulk(bulk: BulkRequest, changes: list[ChangeRequest], decided: BulkGate, actor: Actor) -> None:
    """:func:`hold` for the saved children of a bulk."""
    if decided.reason:
        request_approval(actor, change=None, bulk=bulk, children=changes, reason=decided.reason, impact=decided.impact)
        return
    schedule_spread([c for c in changes if c.state == ChangeState.SCHEDULED], actor)


def schedule_spread(changes: list[ChangeRequest], actor: Actor) -> None:
    """Schedule changes of a bulk, each group of namespaces sharing windows spread within them."""
    groups: dict[str, list[ChangeRequest]] = {}
    cluster = policy_cluster_name(changes[0].managed_id) if changes else None  # a bulk is of one cluster
    for change in changes:
        found = policy.windows_of(change.namespace, labels_of(change.namespace, change.managed_id), cluster)
        groups.setdefault(" | ".join(str(w) for w in found), []).append(change)
    now = clock.now()
    for text, members in groups.items():
        first = members[0]
        found = policy.windows_of(first.namespace, labels_of(first.namespace, first.managed_id), cluster)
        for change, when in zip(members, windows.spread(found, now, len(members)), strict=True):
            schedule_change(change, actor, when, text)
