"""Drift on the namespace page: what changed in the cluster without liqo-dash, who (the field manager),
and the two choices (``offloading.changes.drift``): accept theirs (recorded in the audit trail), or
re-apply mine (the spec of our last applied change, through the one request contract)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from offloading.changes.drift import accept_drift
from offloading.changes.drift import reapply_mine as reapply_mine_change
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.context import current_actor
from offloading.switcher import cluster_reverse
from offloading.views.common import confirm_page, confirmed, forbidden, gate


@login_required
@require_POST
def accept(request: HttpRequest, name: str) -> HttpResponse:
    namespace = gate(request, name, "edit")
    if isinstance(namespace, HttpResponse):
        return namespace
    try:
        accepted = accept_drift(namespace.name, current_actor())
    except ChangeRejected as exc:
        if exc.refusal is Refusal.FORBIDDEN:
            return forbidden(request, exc, namespace)
        for message in exc.messages:
            messages.error(request, message)
        return redirect(cluster_reverse(request, "offloading:namespace_detail", name=name))
    if accepted is not None:
        messages.success(request, "The change made outside liqo-dash is accepted; it stays as it is.")
    return redirect(cluster_reverse(request, "offloading:namespace_detail", name=name))


@login_required
@require_POST
def reapply_mine(request: HttpRequest, name: str) -> HttpResponse:
    namespace = gate(request, name, "edit")
    if isinstance(namespace, HttpResponse):
        return namespace
    try:
        change = reapply_mine_change(namespace.name, current_actor(), confirmed=confirmed(request))
    except ChangeRejected as exc:
        if exc.refusal is Refusal.UNCONFIRMED:
            return confirm_page(request, exc, cluster_reverse(request, "offloading:namespace_detail", name))
        for message in exc.messages:
            messages.error(request, message[:1].upper() + message[1:])
        return redirect(cluster_reverse(request, "offloading:namespace_detail", name=name))
    return redirect(cluster_reverse(request, "offloading:change_detail", pk=change.pk))
