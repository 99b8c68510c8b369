"""Bulk changes by namespace label selector: form, preview, progress."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Case, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from offloading.changes.bulk import bulk_destructive_reason, plan_bulk, request_bulk, retry_failed
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.choices import ChangeState
from offloading.context import current_actor
from offloading.forms import BulkForm
from offloading.models import (
    BulkRequest,
)
from offloading.models.fleet import current_managed
from offloading.switcher import cluster_reverse, elsewhere
from offloading.views.common import (
    capped,
    confirm_page,
    confirmed,
    fleet_placeholders,
    forbidden,
    form_status,
    gate,
)
from offloading.whatif.capacity import rooms
from offloading.whatif.impact import bulk_impact


def _bulk_call(request: HttpRequest, form: BulkForm, service: Any, **extra: Any) -> Any:
    """Call ``plan_bulk`` or ``request_bulk`` with the form's data; None (and the refusal on the
    form) when the change flow refuses. The generations the preview showed come back from the page,
    so a namespace that changed since is left out."""
    data = form.cleaned_data
    try:
        return service(
            data["action"],
            data["namespace_selector"],
            form.spec,
            current_actor(),
            label_namespace=bool(data.get("label_namespace")),
            expected_generations=data.get("expected_generations") or None,
            gitops_override=bool(data.get("gitops_override")),
            managed=current_managed(request),  # the cluster the page reads
            **extra,
        )
    except ChangeRejected as exc:
        form.add_refusal(exc)
        return None


@login_required
@require_http_methods(["GET", "POST"])
def bulk(request: HttpRequest) -> HttpResponse:
    refused = gate(request, None, "bulk")
    if refused is not None:
        return refused
    form = BulkForm(request.POST or None)
    fleet_placeholders(form)
    context: dict[str, Any] = {"form": form}
    if request.method == "POST" and form.is_valid():
        # What the preview showed, again; a destructive change is confirmed by typing the count of
        # namespaces, and the request contract refuses it otherwise (on the box, with why).
        plan = _bulk_call(request, form, plan_bulk)
        if plan is not None:
            context.update(_plan_context(plan))
            typed = (form.cleaned_data.get("confirm_count") or "").strip()
            count = len(plan.changes)
            created = _bulk_call(request, form, request_bulk, confirmed=typed == str(count))
            if created is not None:
                return redirect(cluster_reverse(request, "offloading:bulk_detail", pk=created.pk))
            if form.refusal is Refusal.UNCONFIRMED:
                form.add_error(
                    "confirm_count",
                    f"You typed {typed}, but {count} namespaces will change: review the list and type that number."
                    if typed
                    else f"This needs the typed count: type {count} (the number of namespaces) to confirm.",
                )
    return render(request, "offloading/bulk_form.html", context, status=form_status(form))


def _plan_context(plan: Any) -> dict[str, Any]:
    generations = {c.namespace: c.base_generation or 0 for c in plan.changes}
    impact = bulk_impact(plan.changes)
    rows = {row.namespace: row for row in impact.rows}
    managed = plan.changes[0].managed_id if plan.changes else None  # the bulk's cluster
    room = rooms(impact.targets, managed=managed) if impact.targets else {}
    return {
        "plan": plan,
        "impact": impact,
        # Why the change needs the typed count (None: it does not), as the request contract says it.
        "destructive": bulk_destructive_reason(plan.changes),
        "rooms": list(room.values()),
        "nearly_full": [r for r in room.values() if r.nearly_full],
        "planned": [(c, rows[c.namespace]) for c in plan.changes[:200]],
        "expected_generations": json.dumps(generations, separators=(",", ":")),
    }


def _kept_count(form: BulkForm, plan: Any) -> str:
    """What the admin typed in the confirmation box, when it still is the number of namespaces: a
    preview that lands after the box was filled in (a late change event) must not wipe it, and a
    count that no longer matches must not survive a preview that changed the number."""
    typed = str(form.data.get("confirm_count") or "").strip()
    return typed if typed == str(len(plan.changes)) else ""


@login_required
@require_POST
def bulk_preview(request: HttpRequest) -> HttpResponse:
    refused = gate(request, None, "bulk")
    if refused is not None:
        return refused
    form = BulkForm(request.POST)
    context: dict[str, Any] = {"form": form}
    if form.is_valid():
        plan = _bulk_call(request, form, plan_bulk)
        if plan is not None:
            context.update(_plan_context(plan), confirm_typed=_kept_count(form, plan))
    return render(request, "offloading/_bulk_preview.html", context)


@login_required
@require_GET
def bulk_detail(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(BulkRequest, pk=pk)
    moved = elsewhere(request, item.managed_id)
    if moved is not None:
        return moved  # its page is its cluster's
    rows = request.GET.get("rows", "")  # the page of the changes' table, passed on to the polled progress
    context = {"bulk": item, "progress": item.progress(), "rows": rows if rows.isdigit() else ""}
    return render(request, "offloading/bulk_detail.html", context)


@login_required
@require_POST
def bulk_retry(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask again for the changes of a bulk request that failed (a new bulk request)."""
    get_object_or_404(BulkRequest, pk=pk)
    refused = gate(request, None, "bulk")
    if refused is not None:
        return refused
    try:
        retry = retry_failed(pk, current_actor(), confirmed=confirmed(request))
    except ChangeRejected as exc:
        if exc.refusal is Refusal.FORBIDDEN:
            return forbidden(request, exc)
        if exc.refusal is Refusal.UNCONFIRMED:
            return confirm_page(request, exc, cluster_reverse(request, "offloading:bulk_detail", pk))
        for message in exc.messages:
            messages.error(request, message)
        return redirect(cluster_reverse(request, "offloading:bulk_detail", pk=pk))
    return redirect(cluster_reverse(request, "offloading:bulk_detail", pk=retry.pk))


BULK_ROWS = 100


@login_required
@require_GET
def bulk_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """Polled progress bar; stops polling once every change of the bulk request is terminal."""
    item = get_object_or_404(BulkRequest, pk=pk)
    progress = item.progress()
    # The unfinished and unsuccessful changes first; the table is capped so large bulks stay cheap.
    ordered = item.changes.annotate(done=Case(When(state=ChangeState.APPLIED, then=1), default=0)).order_by(
        "done", "namespace", "pk"
    )
    rows = capped(ordered, request, "rows", BULK_ROWS)
    response = render(
        request,
        "offloading/_bulk_progress.html",
        {
            "bulk": item,
            "progress": progress,
            "refused": item.refused() if progress["failed"] else [],
            "changes": rows.object_list,
            "rows_page": rows,
            "row_limit": BULK_ROWS,
        },
    )
    if progress["done"] >= progress["total"]:
        response.status_code = HttpResponseStopPolling.status_code
    return response
