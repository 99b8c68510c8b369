"""Pages of change governance (issue 29): the approval requests that await the user, with approve and
reject forms (a comment; required to reject); the user's own waiting changes, which they may cancel; and
for admins every waiting change with a break-glass form (a reason is required). The rules are
``offloading.governance``'s; a refusal comes back as a banner naming why.

Per managed cluster (issue 28): the page and its forms are the request's cluster's (``/m/<name>/approvals/``;
the default's on the plain path): it lists that cluster's approvals and waiting changes only, and a step
on a change or bulk of another cluster finds nothing (as that change's own pages would not)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from access import roles
from offloading.choices import ChangeState
from offloading.context import current_actor
from offloading.governance import approvals, clock
from offloading.models import Approval, ApprovalDecision, ChangeRequest
from offloading.models.fleet import current_managed
from offloading.switcher import cluster_reverse

DONE = {"approve": "Approved", "reject": "Rejected", "cancel": "Cancelled", "break-glass": "Broke glass on"}


def _rows(approval_list: list[Approval]) -> list[dict[str, Any]]:
    rows = []
    for approval in approval_list:
        if approval.bulk_id is not None:
            changes = list(ChangeRequest.objects.filter(bulk_id=approval.bulk_id).order_by("namespace"))
        else:
            changes = [approval.change] if approval.change is not None else []
        rows.append({"approval": approval, "changes": changes})
    return rows


@login_required
@require_GET
def approvals_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    managed = current_managed(request)
    changes = ChangeRequest.objects.of(managed)
    mine = changes.filter(requester_id=user.pk, state__in=approvals.WAITING).order_by("id")
    is_admin = roles.role_of(user) == roles.ADMIN
    waiting = changes.filter(state__in=approvals.WAITING).order_by("id")[:500] if is_admin else []
    pending = Approval.objects.of(managed).filter(decision=ApprovalDecision.PENDING)
    return render(
        request,
        "offloading/governance/approvals.html",
        {
            "rows": _rows(approvals.awaiting(user, managed)),
            "mine": list(mine.select_related("schedule")),
            "waiting": list(waiting),
            "is_admin": is_admin,
            "pending_count": pending.count(),
            "now": clock.now(),
            "states": ChangeState,
        },
    )


def _back(request: HttpRequest) -> HttpResponseRedirect:
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=False):
        target = ""
    return HttpResponseRedirect(target or cluster_reverse(request, "offloading:governance_approvals"))


def _step(request: HttpRequest, verb: str, **ids: int) -> HttpResponse:
    text = (request.POST.get("reason") if verb == "break-glass" else request.POST.get("comment")) or ""
    what = f"bulk #{ids['bulk_id']}" if "bulk_id" in ids else f"change #{ids['change_id']}"
    try:
        actor, change_id, bulk_id = current_actor(), ids.get("change_id"), ids.get("bulk_id")
        subject: dict[str, Any] = {"change_id": change_id, "bulk_id": bulk_id, "managed": current_managed(request)}
        if verb == "break-glass":
            approvals.break_glass(actor, reason=text[:2000], **subject)
        elif verb == "approve":
            approvals.approve(actor, comment=text[:2000], **subject)
        elif verb == "reject":
            approvals.reject(actor, comment=text[:2000], **subject)
        else:
            approvals.cancel(actor, comment=text[:2000], **subject)
    except approvals.Refused as exc:
        if exc.code == 403:  # not allowed: the 403 page, as every page that refuses a change
            return render(request, "offloading/forbidden.html", {"reason": exc.message, "namespace": None}, status=403)
        messages.error(request, f"{what}: {exc.message}")
        return _back(request)
    messages.success(request, f"{DONE[verb]} {what}.")
    return _back(request)


@login_required
@require_POST
def change_step(request: HttpRequest, pk: int, verb: str) -> HttpResponse:
    return _step(request, verb, change_id=pk)


@login_required
@require_POST
def bulk_step(request: HttpRequest, pk: int, verb: str) -> HttpResponse:
    return _step(request, verb, bulk_id=pk)
