"""The freshness badge every page polls (its own fragment, every 10 s): the snapshot's last refresh and
its level, answered 304 across the watcher's heartbeats (docs/live-pages.md, "The freshness badge").
offloading.middleware.LivePollMiddleware answers its polls early through ``badge``."""

from __future__ import annotations

import hashlib
import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.http import parse_etags
from django.views.decorators.http import require_GET

from offloading.context_processors import freshness_context
from offloading.models.fleet import ManagedRef, current_managed
from offloading.views import livetags


@login_required
@require_GET
def freshness(request: HttpRequest) -> HttpResponse:
    """The freshness badge alone (every page polls it; the browser ticks its age in between), of the
    page's managed cluster (its copy under /m/<name>/ is that cluster's)."""
    return badge(request, livetags.who_of(request), current_managed(request))


def badge(request: HttpRequest, who: str, managed: ManagedRef = None) -> HttpResponse:
    """The badge's answer for the user ``who`` ("pk:role", as ``livetags.who_of``) of the managed cluster
    ``managed`` (None: the default one); LivePollMiddleware asks it directly for a poll whose session
    and role it checked.

    The watcher marks the snapshot fresh every few seconds, and the badge is polled every 10 s: if its
    ETag followed the refresh time, nearly every poll would render it again. The browser works out
    the age, and the level and word that follow from it, from the refresh time alone
    (static/js/liqo-dash.js), so the ETag is a hash of only what it cannot work out: whether there is
    a snapshot, the API server's outage, the level and reason as the server sees them (an error, a
    watcher gone quiet) and the refresh interval. A poll that holds it gets a 304 while those stay,
    with the newest refresh time in ``X-Fresh-At`` (ISO 8601, as the badge's ``data-fresh-at``), which
    the page puts on the badge it keeps."""
    context = freshness_context(managed)
    state = context["snapshot"]
    outage = context["api_outage"]
    shown = (
        state.last_success_at is not None,
        outage and (outage.since, outage.error),
        context["freshness_level"],
        context["freshness_reason"],
        context["freshness_interval"],
        who,
        state.managed_id,  # one cluster's badge is never a 304 of another's
    )
    etag = '"' + hashlib.sha256(json.dumps(shown, default=str).encode()).hexdigest()[:32] + '"'
    if request.headers.get("X-Live-Poll") == "1" and etag in parse_etags(request.headers.get("If-None-Match", "")):
        response = HttpResponse(status=304)
    else:
        # The badge needs only its own context: no context processors (they would read the state again).
        response = HttpResponse(render_to_string("offloading/_freshness.html", context))
    response["ETag"] = etag
    if state.last_success_at is not None:
        response["X-Fresh-At"] = date_format(timezone.localtime(state.last_success_at), "c")
    response["Cache-Control"] = "no-store"
    return response


freshness.live_badge = True  # type: ignore[attr-defined]  # LivePollMiddleware answers its polls early
