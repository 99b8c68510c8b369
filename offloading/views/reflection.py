"""The namespace page's reflection section, loaded after the page (it reads the cluster live:
``offloading.insight.reflection``), as the signed-in user when impersonation is on."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from access.impersonation import identity_for
from offloading.cluster.errors import KubeError
from offloading.cluster.identity import acting_as
from offloading.cluster.managed import talking_to
from offloading.insight.reflection import READ_LIMIT, ReflectionReport, report
from offloading.models import ManagedCluster, Namespace
from offloading.models.fleet import current_managed


@login_required
@require_GET
def namespace_reflection(request: HttpRequest, name: str) -> HttpResponse:
    namespace = get_object_or_404(Namespace.objects.of(current_managed(request)), name=name)
    cluster = ManagedCluster.objects.get(pk=namespace.managed_id)
    found: ReflectionReport
    try:
        # Read in the page's cluster, as the user is seen there (its own impersonation and groups).
        with talking_to(cluster), acting_as(identity_for(request.user.get_username(), cluster)):
            found = report(namespace.name)
    except KubeError as exc:  # the cluster has no usable configuration: said as an unreachable one
        found = report(namespace.name, unreachable=exc.message)
    context = {"namespace": namespace, "report": found, "limit": READ_LIMIT}
    # The page loads the section with htmx; without it, the link opens it as a page of its own.
    template = (
        "offloading/_reflection.html" if getattr(request, "htmx", False) else "offloading/namespace_reflection.html"
    )
    return render(request, template, context)
