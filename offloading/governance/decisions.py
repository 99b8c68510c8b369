"""What was decided on changes (issue 29), for the pages, the API and a GitOps hand-off: the approval that
counts for a change, and the decisions that let changes through, as a hand-off's commit message names them.
Reads only: the decisions themselves are ``offloading.governance.approvals``'."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models

from offloading.gitops import repo
from offloading.models import Approval, ApprovalDecision, ChangeRequest


def current_approval(change: ChangeRequest) -> Approval | None:
    """The approval that counts for ``change`` (its own newest, else its bulk's), or None."""
    own = Approval.objects.filter(change=change).order_by("-id").first()
    if own is None and change.bulk_id is not None:
        return Approval.objects.filter(bulk_id=change.bulk_id).order_by("-id").first()
    return own


def decisions_for(changes: Iterable[ChangeRequest]) -> list[Approval]:
    """The approvals that let ``changes`` through (approved, or break glass), oldest first: what a GitOps
    hand-off's commit message names (``offloading.gitops.handoff.hand_off(approvals=...)``)."""
    changes = list(changes)
    ids = [c.pk for c in changes]
    bulks = {c.bulk_id for c in changes if c.bulk_id is not None}
    decided = (ApprovalDecision.APPROVED, ApprovalDecision.BROKE_GLASS)
    found = Approval.objects.filter(decision__in=decided).filter(
        models.Q(change_id__in=ids) | models.Q(bulk_id__in=bulks)
    )
    return list(found.order_by("decided_at", "id"))


def handoff_approvals(changes: Iterable[ChangeRequest]) -> tuple[repo.Approval, ...]:
    """:func:`decisions_for` as the GitOps hand-off's commit message names them: who, when, and what they
    said (a break glass says so, with its reason)."""
    named = []
    for decision in decisions_for(changes):
        comment = decision.comment
        if decision.decision == ApprovalDecision.BROKE_GLASS:
            comment = f"break glass: {comment}" if comment else "break glass"
        at = decision.decided_at.isoformat() if decision.decided_at else ""
        named.append(repo.Approval(decision.decided_by_name or "(unknown)", at, comment))
    return tuple(named)
