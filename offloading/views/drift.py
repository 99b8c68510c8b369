"""Drift on the namespace page: what changed in the cluster without liqo-dash, who (the field manager),
and the two choices: accept theirs (recorded in the audit trail), or re-apply mine (the spec of our last
applied change, through the one request contract)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from offloading.changes.errors import ChangeRejected
from offloading.changes.requests import ChangeInput, submit
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.context import current_actor
from offloading.models import AuditEvent, ChangeRequest, Namespace
from offloading.views.common import page_refusal


def open_drift(namespace: Namespace) -> dict[str, Any]:
    """The newest drift of the namespace not yet answered (by a change of ours or an acceptance)."""
    drift = (
        AuditEvent.objects.filter(namespace=namespace.name, source=Source.EXTERNAL)
        .exclude(action=AuditAction.DRIFT_ACCEPTED)
        .order_by("-seq")
        .first()
    )
    if drift is None:
        return {}
    answered = AuditEvent.objects.filter(
        namespace=namespace.name,
        seq__gt=drift.seq,
        action__in=[AuditAction.DRIFT_ACCEPTED, AuditAction.REQUESTED],
    ).exists()
    if answered:
        return {}
    mine = (
        ChangeRequest.objects.filter(namespace=namespace.name, state=ChangeState.APPLIED)
        .exclude(action=ChangeAction.UNOFFLOAD)
        .order_by("-finished_at", "-id")
        .first()
    )
    return {"drift": drift, "drift_mine": mine}


@login_required
@require_POST
def accept(request: HttpRequest, name: str) -> HttpResponse:
    namespace = get_object_or_404(Namespace, name=name)
    refused = page_refusal(request, namespace, "edit")
    if refused is not None:
        return refused
    found = open_drift(namespace)
    if found:
        actor = current_actor()
        AuditEvent.objects.create(
            user_id=actor.user_id,
            user_name=actor.user_name,
            source=actor.source,
            request_id=actor.request_id,
            action=AuditAction.DRIFT_ACCEPTED,
            namespace=namespace.name,
            after=namespace.offloading_spec if namespace.offloaded else None,
            outcome="accepted",
            message=f"Accepted the change made outside liqo-dash (audit event #{found['drift'].seq}) as it is",
        )
        messages.success(request, "The change made outside liqo-dash is accepted; it stays as it is.")
    return redirect("offloading:namespace_detail", name=name)


@login_required
@require_POST
def reapply_mine(request: HttpRequest, name: str) -> HttpResponse:
    namespace = get_object_or_404(Namespace, name=name)
    refused = page_refusal(request, namespace, "edit")
    if refused is not None:
        return refused
    mine = open_drift(namespace).get("drift_mine")
    if mine is None:
        messages.error(request, "There is no change of liqo-dash to apply again.")
        return redirect("offloading:namespace_detail", name=name)
    current = namespace.offloading_generation if namespace.offloaded else 0
    wanted = ChangeInput(namespace.name, ChangeAction.OFFLOAD, mine.desired_spec or {}, current, mine.label_namespace)
    try:
        change = submit(wanted, current_actor())
    except ChangeRejected as exc:
        for message in exc.messages:
            messages.error(request, message)
        return redirect("offloading:namespace_detail", name=name)
    return redirect("offloading:change_detail", pk=change.pk)
