"""The audit page: filters, a before/after diff per event, drift marked, fast at 100,000 events."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from offloading.auditfilters import AuditFilterSet
from offloading.models import AuditEvent

PAGE_SIZE = 50


def diff(before: Any, after: Any) -> list[tuple[str, Any, Any]]:
    """(field, before, after) for every top-level field that differs; the whole values otherwise."""
    if isinstance(before, dict) or isinstance(after, dict):
        old, new = before or {}, after or {}
        if isinstance(old, dict) and isinstance(new, dict):
            keys = sorted(set(old) | set(new))
            return [(k, old.get(k), new.get(k)) for k in keys if old.get(k) != new.get(k)]
    return [] if before == after else [("", before, after)]


@login_required
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    filterset = AuditFilterSet(request.GET, queryset=AuditEvent.objects.select_related("change").order_by("-seq"))
    events = filterset.qs if filterset.is_valid() else AuditEvent.objects.none()
    page = Paginator(events.defer("prev_hash", "hash", "key_id"), PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [(event, diff(event.before, event.after)) for event in page]
    query = request.GET.copy()
    query.pop("page", None)
    context = {"filterset": filterset, "page": page, "rows": rows, "query": query.urlencode()}
    return render(request, "offloading/audit_list.html", context)
