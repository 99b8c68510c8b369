"""What keeps open pages true without a reload: the freshness badge, polled by every page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from offloading.context_processors import freshness_context


@login_required
@require_GET
def freshness(request: HttpRequest) -> HttpResponse:
    """The freshness badge alone (every page polls it; the browser ticks its age in between)."""
    response = render(request, "offloading/_freshness.html", freshness_context())
    response["Cache-Control"] = "no-store"
    return response
