"""What keeps open pages true without a reload: the freshness badge (polled by every page) and the
live regions' cheap "nothing changed" answer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import condition, require_GET

from access import roles
from offloading.context_processors import freshness_context
from offloading.models import LiveVersion

# --------------------------------------------------------------------------------------------------
# Live regions poll themselves (static/js/liqo-dash.js sends the ETag it holds, with the header
# X-Live-Poll): the list, matrix, clusters, a cluster's page, the overview and the audit trail ask for
# the URL the browser shows (filters, sort and page kept); a namespace's status, a change's status, a
# bulk's progress and the freshness badge ask for their own fragment. While nothing the region shows has
# changed, the answer is an empty 304 decided from one indexed read of a few LiveVersion rows: counters
# that database triggers bump in the same transaction as the rows they count (migration 0013,
# docs/live-pages.md), so an idle open page costs the same at any fleet size.

# Every kind of data a live region may show (offloading.models.livetriggers counts the writes to its tables).
KINDS: tuple[str, ...] = (
    "access",  # access.Scope, the users' groups: the controls a user may use
    "alerts",  # Alert: the overview's notifications line
    "audit",  # AuditEvent
    "bulk",  # BulkRequest
    "changes",  # ChangeRequest
    "clusters",  # Cluster
    "events",  # KubeEvent
    "namespaces",  # Namespace
    "nodes",  # VirtualNode
    "mappings",  # PeerNamespaceMap, MappingEntry: Liqo's NamespaceMaps
    "offloadings",  # ClusterOffloading
    "pods",  # Pod
    "resources",  # LiqoResource
    "snapshot",  # SnapshotState: only its last_error and local_cluster_id (the refresh times tick)
    "transitions",  # StatusTransition
)
_EVERY_PAGE = ("access", "snapshot")

# What each live region (by URL name) shows; a region not listed depends on every kind.
REGIONS: dict[str, tuple[str, ...]] = {
    "home": ("alerts", "changes", "clusters", "events", "namespaces", "offloadings", "pods", "resources"),
    "namespace_list": ("changes", "events", "namespaces", "offloadings", "pods"),
    "fleet_matrix": ("clusters", "namespaces", "offloadings"),
    "cluster_list": ("clusters", "nodes", "offloadings"),
    "cluster_detail": ("clusters", "events", "namespaces", "nodes", "offloadings", "pods", "resources"),
    "audit_list": ("audit", "bulk", "changes"),
    "namespace_status": ("changes", "mappings", "namespaces", "offloadings"),
    "change_status": ("changes", "events", "mappings", "namespaces", "offloadings"),
    "bulk_progress": ("bulk", "changes"),
}


def versions(kinds: tuple[str, ...] = KINDS) -> dict[str, int]:
    """The counter of each kind: one indexed read, whatever the size of the fleet. A kind without a row
    (a database emptied by ``flush``) counts 0."""
    found = dict(LiveVersion.objects.filter(kind__in=kinds).values_list("kind", "version"))
    return {kind: int(found.get(kind, 0)) for kind in kinds}


def region_kinds(url_name: str | None) -> tuple[str, ...]:
    """The kinds a live region depends on: what it shows, plus what every page shows."""
    shown = REGIONS.get(url_name or "")
    return KINDS if shown is None else tuple(sorted({*shown, *_EVERY_PAGE}))


def data_version(kinds: tuple[str, ...] = KINDS) -> str:
    """Changes whenever anything of ``kinds`` may have changed (every kind by default): snapshot rows
    written, status transitions, changes moving, audit events, the snapshot's error or cluster id.
    It never repeats: each counter only grows."""
    return ".".join(f"{kind}{version}" for kind, version in versions(kinds).items())


def _who(request: HttpRequest) -> str:
    user: Any = request.user
    return f"{user.pk}:{roles.role_of(user)}" if user.is_authenticated else "-"


def _poll_etag(request: HttpRequest, *args: Any, **kwargs: Any) -> str | None:
    """The ETag of a live region's poll (None for an ordinary visit: always rendered). Keyed by the
    user and role as well: the page is rendered per user, so two viewers never share an answer."""
    if request.headers.get("X-Live-Poll") != "1":
        return None
    match = request.resolver_match
    version = data_version(region_kinds(match.url_name if match else None))
    key = f"{version}|{request.get_full_path()}|{_who(request)}|{request.headers.get('HX-Request', '')}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Make ``view`` answer a live poll with 304 while nothing it shows has changed."""
    return condition(etag_func=_poll_etag)(view)


@login_required
@require_GET
def freshness(request: HttpRequest) -> HttpResponse:
    """The freshness badge alone (every page polls it; the browser ticks its age in between). A poll
    that holds the badge's ETag gets a 304 while what the badge says has not moved: the snapshot's
    refresh times and error, the API server's outage, the level and reason (which age with the clock)."""
    context = freshness_context()
    state = context["snapshot"]
    outage = context["api_outage"]
    shown = (
        state.last_success_at,
        state.last_attempt_at,
        state.last_error,
        context["snapshot_stale"],
        outage and (outage.since, outage.error),
        context["freshness_level"],
        context["freshness_reason"],
        context["freshness_interval"],
        _who(request),
    )
    etag = '"' + hashlib.sha256(json.dumps(shown, default=str).encode()).hexdigest()[:32] + '"'
    if request.headers.get("X-Live-Poll") == "1" and etag in request.headers.get("If-None-Match", ""):
        response = HttpResponse(status=304)
    else:
        # The badge needs only its own context: no context processors (they would read the state again).
        response = HttpResponse(render_to_string("offloading/_freshness.html", context))
    response["ETag"] = etag
    response["Cache-Control"] = "no-store"
    return response
