"""Views across the managed clusters (issue 28): every cluster's namespaces in one list, with their
cluster, and each cluster's snapshot state (how fresh, its last error) above it; every cluster's changes
in one list. Read only: each row links to its namespace's (or change's) page in its own cluster
(offloading/switcher.py), where it is changed. Readers here read every cluster
on purpose (no ``objects.of``, offloading/models/fleet.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from offloading.choices import ChangeState
from offloading.models import ChangeRequest, ClusterOffloading, ManagedCluster, Namespace, SnapshotState
from offloading.models.managed import configured
from offloading.switcher import cluster_base

PER_PAGE = 50


class _ByCluster(forms.Form):
    """A filter of a page across the fleet: its ``cluster`` choices are the managed clusters' names."""

    cluster = forms.ChoiceField(required=False, label="Managed cluster")

    def __init__(self, data: object, clusters: list[str]) -> None:
        super().__init__(data)  # type: ignore[arg-type]
        field = self.fields["cluster"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "Every managed cluster"), *((name, name) for name in clusters)]


class FleetFilter(_ByCluster):
    q = forms.CharField(required=False, max_length=253, label="Name contains")
    offloaded = forms.ChoiceField(
        required=False, choices=(("", "Offloaded or not"), ("yes", "Offloaded"), ("no", "Not offloaded"))
    )


class FleetChangeFilter(_ByCluster):
    state = forms.ChoiceField(required=False, choices=(("", "Every state"), *ChangeState.choices), label="State")
    q = forms.CharField(required=False, max_length=253, label="Namespace contains")


@dataclass(frozen=True)
class ClusterSummary:
    name: str
    is_default: bool
    namespaces: int
    offloaded: int
    refreshed_at: datetime | None
    last_error: str
    stale: bool
    failing: bool  # its last refresh failed (an error after its last success)

    @property
    def base(self) -> str:
        """Where its pages are (offloading/switcher.py): the default cluster's have no prefix."""
        return cluster_base(self.name, self.is_default)


@dataclass(frozen=True)
class FleetRow:
    cluster: str
    is_default: bool
    name: str
    offloaded: bool
    phase: str
    remote_name: str
    selected: int

    @property
    def base(self) -> str:
        return cluster_base(self.cluster, self.is_default)


def _summaries(clusters: list[ManagedCluster]) -> list[ClusterSummary]:
    counts: dict[int, Any] = {
        row["managed_id"]: row
        for row in Namespace.objects.order_by()
        .values("managed_id")
        .annotate(total=Count("id"), offloaded=Count("id", filter=Q(offloaded=True)))
    }
    states = {state.managed_id: state for state in SnapshotState.objects.all()}
    now = timezone.now()
    summaries = []
    for cluster in clusters:
        count: dict[str, Any] = counts.get(cluster.pk, {})
        state = states.get(cluster.pk)
        summaries.append(
            ClusterSummary(
                cluster.name,
                cluster.is_default,
                int(count.get("total", 0)),
                int(count.get("offloaded", 0)),
                state.last_success_at if state else None,
                (state.last_error or "") if state else "",
                state.is_stale(now) if state else True,
                bool(state and state.last_refresh_failed),
            )
        )
    return summaries


@login_required
@require_GET
def fleet_namespaces(request: HttpRequest) -> HttpResponse:
    """Every managed cluster's namespaces, filtered by cluster, name and whether they are offloaded."""
    clusters = configured(ManagedCluster.objects.order_by("-is_default", "name"))
    form = FleetFilter(request.GET, [cluster.name for cluster in clusters])
    queryset = Namespace.objects.none()
    if form.is_valid():
        wanted = form.cleaned_data
        queryset = Namespace.objects.all()
        if wanted["cluster"]:
            queryset = queryset.filter(managed__name=wanted["cluster"])
        if wanted["q"]:
            queryset = queryset.filter(name__icontains=wanted["q"])
        if wanted["offloaded"]:
            queryset = queryset.filter(offloaded=wanted["offloaded"] == "yes")
    listed = queryset.order_by("-managed__is_default", "managed__name", "name").values_list(
        "pk", "managed__name", "managed__is_default", "name", "offloaded", "offloading_phase", "remote_namespace_name"
    )
    page = Paginator(listed, PER_PAGE).get_page(request.GET.get("page"))
    selected = dict(
        ClusterOffloading.objects.filter(selected=True, namespace_id__in=[row[0] for row in page])
        .order_by()
        .values("namespace_id")
        .annotate(n=Count("id"))
        .values_list("namespace_id", "n")
    )
    rows = [FleetRow(*row[1:], selected=selected.get(row[0], 0)) for row in page]
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "page": page,
        "rows": rows,
        "query": query.urlencode(),
        "summaries": _summaries(clusters),
    }
    return render(request, "offloading/fleet_namespaces.html", context)


@login_required
@require_GET
def fleet_changes(request: HttpRequest) -> HttpResponse:
    """Every managed cluster's changes, newest first, filtered by cluster, state and namespace; each row
    names its cluster and links to the change's page there."""
    clusters = configured(ManagedCluster.objects.order_by("-is_default", "name"))
    form = FleetChangeFilter(request.GET, [cluster.name for cluster in clusters])
    queryset = ChangeRequest.objects.none()
    if form.is_valid():
        wanted = form.cleaned_data
        queryset = ChangeRequest.objects.select_related("managed").order_by("-created_at", "-id")
        if wanted["cluster"]:
            queryset = queryset.filter(managed__name=wanted["cluster"])
        if wanted["state"]:
            queryset = queryset.filter(state=wanted["state"])
        if wanted["q"]:
            queryset = queryset.filter(namespace__icontains=wanted["q"])
    page = Paginator(queryset, PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    rows = [(change, cluster_base(change.managed.name, change.managed.is_default)) for change in page]
    context = {"form": form, "page": page, "rows": rows, "query": query.urlencode()}
    return render(request, "offloading/fleet_changes.html", context)
