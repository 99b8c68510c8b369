"""What keeps open pages true without a reload: the freshness badge (polled by every page) and the
live pages' cheap "nothing changed" answer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import condition, require_GET

from access import roles
from offloading.context_processors import freshness_context
from offloading.models import (
    AuditEvent,
    ChangeRequest,
    Cluster,
    ClusterOffloading,
    Namespace,
    SnapshotState,
    StatusTransition,
    VirtualNode,
)


@login_required
@require_GET
def freshness(request: HttpRequest) -> HttpResponse:
    """The freshness badge alone (every page polls it; the browser ticks its age in between)."""
    response = render(request, "offloading/_freshness.html", freshness_context())
    response["Cache-Control"] = "no-store"
    return response


# --------------------------------------------------------------------------------------------------
# Live pages: the list, matrix and clusters pages poll themselves (static/js/liqo-dash.js sends the
# ETag it holds, with the header X-Live-Poll); while the snapshot has not moved, the answer is an empty
# 304 computed from a handful of aggregates, so an open page costs almost nothing; when it moved, the
# page is rendered and the browser swaps the region, keeping the filters, sort and page of the URL.


def data_version() -> str:
    """Changes whenever anything a page shows may have changed: snapshot rows written, status
    transitions, changes moving, audit events, the snapshot's own refresh state."""
    parts = [
        Namespace.objects.aggregate(n=Count("id"), t=Max("refreshed_at")),
        ClusterOffloading.objects.aggregate(n=Count("id"), i=Max("id"), t=Max("since")),
        Cluster.objects.aggregate(n=Count("id"), t=Max("refreshed_at")),
        VirtualNode.objects.aggregate(n=Count("id"), t=Max("refreshed_at")),
        StatusTransition.objects.aggregate(i=Max("id")),
        ChangeRequest.objects.aggregate(t=Max("updated_at"), n=Count("id")),
        AuditEvent.objects.aggregate(i=Max("id")),
        # Not the refresh times: the watcher marks the snapshot fresh every few seconds (the badge shows it).
        SnapshotState.objects.values("last_error", "local_cluster_id").first(),
    ]
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()[:32]


def _poll_etag(request: HttpRequest, *args: Any, **kwargs: Any) -> str | None:
    """The ETag of a live page's poll (None for an ordinary visit: always rendered)."""
    if request.headers.get("X-Live-Poll") != "1":
        return None
    user: Any = request.user
    who = f"{user.pk}:{roles.role_of(user)}" if user.is_authenticated else "-"
    key = f"{data_version()}|{request.get_full_path()}|{who}|{request.headers.get('HX-Request', '')}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Make ``view`` answer a live poll with 304 while nothing it shows has changed."""
    return condition(etag_func=_poll_etag)(view)
