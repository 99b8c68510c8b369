"""The namespace page's "Across the domain" section (issue 28), loaded after the page: the namespace's
twins on the peers that are managed clusters too, read live from each provider's own API
(``offloading.cluster.twins``: short timeouts, every provider at once, answers cached a few seconds), and
the peers this dashboard does not manage. As the namespace page: any signed-in user with a role (the
access middleware refuses one without), a namespace the snapshot does not hold is a 404; the providers
are asked as the signed-in user when impersonation is on, as the reflection section asks this cluster."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from access.impersonation import identity_per_cluster
from offloading.cluster import remote, twins
from offloading.models import Namespace
from offloading.models.fleet import current_managed


@login_required
@require_GET
def namespace_twins(request: HttpRequest, name: str) -> HttpResponse:
    namespace = get_object_or_404(
        Namespace.objects.of(current_managed(request)).only(
            "name", "managed_id", "offloaded", "offloading_spec", "remote_namespace_name"
        ),
        name=name,
    )
    across = twins.twins(namespace, identity_per_cluster(request.user.get_username()))
    response = render(
        request,
        "offloading/_twins.html",
        {"namespace": namespace, "across": across, "deadline": remote.DEADLINE, "cached": remote.CACHE_SECONDS},
    )
    response["Cache-Control"] = "no-store"  # one user's reading of other clusters
    return response
