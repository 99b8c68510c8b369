"""A managed cluster's access page (issue 28, admins only): whether changes reach it as the user who asked
(Kubernetes impersonation) and with which group for each role, where it differs from the installation's
KUBE_IMPERSONATE and KUBE_IMPERSONATE_GROUPS (``access.impersonation`` applies them to the access review,
the dry-run and the push). Every cluster but the default has one, those of LIQO_DASH_CLUSTERS too: these
are not connection settings, the setting does not make them again. The default cluster follows the
installation's settings, which are its own: its page says so and changes nothing; so does the page of a
context LIQO_DASH_CLUSTER_ACCESS names (the setting writes its row in every process).

A change is one sealed audit event (``cluster_updated``) naming the settings and their values before and
after, in the transaction that saves them."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from access import impersonation, roles
from offloading.audit import events
from offloading.choices import AuditAction
from offloading.context import current_actor
from offloading.models.managed import ManagedCluster, configured_access, ensure_configured
from offloading.views.managed_forms import AccessForm

ADMINS_ONLY_ACCESS = "Admins only: a managed cluster's access settings decide as whom changes reach it."
FIELDS = ("impersonation", "impersonation_groups")


def in_force(cluster: ManagedCluster) -> dict[str, object]:
    """What applies on ``cluster`` now, and where it comes from, for the page and the list."""
    return {
        "impersonates": impersonation.enabled(cluster),
        "impersonation_from": _source(cluster, "impersonation", "KUBE_IMPERSONATE"),
        "groups": roles.parse_role_map(impersonation.role_map(cluster) or settings.KUBE_IMPERSONATE_GROUPS),
        "groups_from": _source(cluster, "impersonation_groups", "KUBE_IMPERSONATE_GROUPS"),
    }


def _source(cluster: ManagedCluster, field: str, installation: str) -> str:
    """Where the value of ``field`` in force on ``cluster`` comes from."""
    if cluster.is_default or not getattr(cluster, field):
        return installation
    return "LIQO_DASH_CLUSTER_ACCESS" if configured_access(cluster) is not None else "this cluster"


@login_required
@require_http_methods(["GET", "POST"])
def managed_access(request: HttpRequest, name: str) -> HttpResponse:
    if roles.role_of(request.user) != roles.ADMIN:  # asked first: nobody else learns whether it exists
        refusal = {"reason": ADMINS_ONLY_ACCESS, "action": "change the access of", "namespace": None}
        return render(request, "offloading/forbidden.html", refusal, status=403)
    ensure_configured()  # LIQO_DASH_CLUSTERS' rows, with what LIQO_DASH_CLUSTER_ACCESS says of them
    cluster = get_object_or_404(ManagedCluster, name=name)
    fixed = cluster.is_default or configured_access(cluster) is not None  # set elsewhere: read-only here
    form = AccessForm(request.POST if request.method == "POST" and not fixed else None, cluster=cluster)
    status = 409 if request.method == "POST" and fixed else 200
    if status == 200 and request.method == "POST":
        if not form.is_valid():
            status = 400
        elif not form.changed():
            messages.info(request, f"Nothing changed: {cluster.name} keeps its access settings.")
            return redirect(reverse("offloading:managed_cluster_access", args=[cluster.name]))
        else:
            changed = form.changed()
            with transaction.atomic():
                row = get_object_or_404(ManagedCluster.objects.select_for_update(), pk=cluster.pk)
                before = {name_: getattr(row, name_) for name_ in changed}
                for name_ in changed:
                    setattr(row, name_, form.cleaned_data[name_])
                row.save(update_fields=[*changed, "updated_at"])
                events.record(
                    current_actor(),
                    AuditAction.CLUSTER_UPDATED,
                    "",
                    outcome="updated",
                    before={"cluster": row.name, **before},
                    after={"cluster": row.name, "changed": changed, **{k: getattr(row, k) for k in changed}},
                    message=f"Edited the access of managed cluster {row.name}: {', '.join(changed)}",
                )
            messages.success(request, f"Saved the access of {row.name} ({', '.join(changed)}).")
            return redirect(reverse("offloading:managed_cluster_access", args=[row.name]))
    context = {
        "cluster": cluster,
        "form": form,
        "now": in_force(cluster),
        "from_setting": configured_access(cluster) is not None,
    }
    return render(request, "offloading/managed/access.html", context, status=status)
