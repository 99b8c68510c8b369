"""The audit page: filters, a before/after diff per event, drift marked, fast at 100,000 events.

Cluster selectors are said in liqoctl syntax (``impact.field_text``: the JSON form, saying so, for a term
liqoctl cannot print). A bulk request is one entry (``bulk_requested``) with its namespaces; the events of
its changes that are on the same page fold under it (a ``<details>``), the others say which bulk they
are part of.

Every managed cluster's events (issue 28): with more than one cluster, a cluster filter and a column say
whose each event is (an event of another cluster than the default links its namespace to that cluster's
rows on the fleet-wide namespaces page: the namespace pages read the default cluster)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from offloading.choices import AuditAction
from offloading.filtersets import AuditFilterSet
from offloading.models import AuditEvent, ManagedCluster
from offloading.models.fleet import current_managed
from offloading.switcher import cluster_name
from offloading.whatif.impact import field_text

PAGE_SIZE = 50


def diff(before: Any, after: Any) -> list[tuple[str, Any, Any]]:
    """(field, before, after) for every top-level field that differs; the whole values otherwise."""
    if isinstance(before, dict) or isinstance(after, dict):
        old, new = before or {}, after or {}
        if isinstance(old, dict) and isinstance(new, dict):
            keys = sorted(set(old) | set(new))
            return [(k, _said(k, old.get(k)), _said(k, new.get(k))) for k in keys if old.get(k) != new.get(k)]
    return [] if before == after else [("", before, after)]


def _said(field: str, value: Any) -> Any:
    """A spec field as people read it: the cluster selector in liqoctl syntax (its terms ORed)."""
    if field != "clusterSelector" or not isinstance(value, dict):
        return value
    return field_text(field, {field: value})


def _bulk_of(event: AuditEvent) -> int | None:
    change = event.change
    return change.bulk_id if change is not None else None


def trail_rows(events: list[AuditEvent]) -> list[tuple[AuditEvent, list[tuple[str, Any, Any]], list[AuditEvent]]]:
    """(event, its diff, the events folded under it) for a page of events: the events of a bulk's
    changes fold under the bulk's own entry when it is on the same page."""
    bulks = {
        (event.after or {}).get("bulk"): event
        for event in events
        if event.action == AuditAction.BULK_REQUESTED and isinstance(event.after, dict)
    }
    children: dict[int, list[AuditEvent]] = {}
    rows = []
    for event in events:
        bulk_id = _bulk_of(event)
        if bulk_id in bulks and event.action == AuditAction.REQUESTED:
            children.setdefault(bulks[bulk_id].pk, []).append(event)
            continue
        rows.append(event)
    out = []
    for event in rows:
        if event.action == AuditAction.BULK_REQUESTED:
            asked: dict[str, Any] = event.after if isinstance(event.after, dict) else {}
            spec: dict[str, Any] = asked["spec"] if isinstance(asked.get("spec"), dict) else {}
            lines = [(key, None, _said(key, value)) for key, value in sorted(spec.items())]
            folded = children.get(event.pk, [])
            here = {child.namespace for child in folded}
            names: list[Any] = asked["namespaces"] if isinstance(asked.get("namespaces"), list) else []
            event.bulk_id = asked.get("bulk")  # type: ignore[attr-defined]
            event.bulk_namespaces = names  # type: ignore[attr-defined]
            event.bulk_elsewhere = [name for name in names if name not in here]  # type: ignore[attr-defined]
            out.append((event, lines, folded))
        else:
            out.append((event, diff(event.before, event.after), []))
    return out


@login_required
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    queryset = AuditEvent.objects.select_related("change", "managed").order_by("-seq")
    if cluster_name(request):  # a cluster's own trail (/m/<name>/audit/); without it every cluster's
        queryset = queryset.filter(managed_id=current_managed(request))
    filterset = AuditFilterSet(request.GET, queryset=queryset)
    fleet = ManagedCluster.objects.count() > 1
    if not fleet and not request.GET.get("cluster"):
        del filterset.form.fields["cluster"]  # one cluster: nothing to choose, nothing to say per row
    events = filterset.qs if filterset.is_valid() else AuditEvent.objects.none()
    page = Paginator(events.defer("prev_hash", "hash", "key_id"), PAGE_SIZE).get_page(request.GET.get("page"))
    rows = trail_rows(list(page))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"filterset": filterset, "page": page, "rows": rows, "query": query.urlencode(), "fleet": fleet}
    return render(request, "offloading/audit_list.html", context)
