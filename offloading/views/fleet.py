"""Pages that read the snapshot: overview, clusters, namespaces, matrix, namespace detail, audit."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from offloading.choices import ChangeState
from offloading.diagnosis import diagnose
from offloading.filtersets import NamespaceFilterSet
from offloading.models import (
    ChangeRequest,
    Cluster,
    ClusterOffloading,
    Namespace,
    StatusTransition,
    VirtualNode,
)
from offloading.views.common import (
    HtmxHttpRequest,
    annotate_inventory,
    inventory_context,
    split_labels,
    status_context,
)
from offloading.views.drift import open_drift


@login_required
@require_GET
def cluster_list(request: HttpRequest) -> HttpResponse:
    clusters = list(Cluster.objects.all())
    hosted = dict(
        ClusterOffloading.objects.filter(selected=True)
        .order_by()
        .values("cluster_id")
        .annotate(n=Count("id"))
        .values_list("cluster_id", "n")
    )
    nodes: dict[str, list[VirtualNode]] = {}
    for vn in VirtualNode.objects.all():
        nodes.setdefault(vn.cluster_id, []).append(vn)
    rows = [
        {
            "cluster": c,
            "virtual_nodes": [(vn, *split_labels(vn.labels)) for vn in nodes.get(c.cluster_id, [])],
            "hosted": hosted.get(c.cluster_id, 0),
        }
        for c in clusters
    ]
    return render(request, "offloading/cluster_list.html", {"rows": rows})


@login_required
@require_GET
@vary_on_headers("HX-Request")
def namespace_list(request: HtmxHttpRequest) -> HttpResponse:
    filterset = NamespaceFilterSet(request.GET, queryset=Namespace.objects.all())
    selected_states = Prefetch(
        "cluster_states", queryset=ClusterOffloading.objects.filter(selected=True).order_by("cluster_id")
    )
    # An invalid filter shows its error and no rows (rather than silently ignoring the filter).
    queryset = filterset.qs if filterset.is_valid() else Namespace.objects.none()
    page = Paginator(queryset.defer("offloading_status").prefetch_related(selected_states), 50).get_page(
        request.GET.get("page")
    )
    page.object_list = list(page.object_list)  # evaluated once, so the counts set below stay on the rows
    annotate_inventory(page.object_list)
    query = request.GET.copy()
    query.pop("page", None)
    context = {"filterset": filterset, "page": page, "query": query.urlencode(), "phase_counts": _phase_counts()}
    template = "offloading/_namespace_table.html" if request.htmx else "offloading/namespace_list.html"
    return render(request, template, context)


def _phase_counts() -> dict[str, int]:
    counts = dict(Namespace.objects.filter(offloaded=True).values_list("offloading_phase").annotate(n=Count("id")))
    counts["not offloaded"] = Namespace.objects.filter(offloaded=False).count()
    return counts


@login_required
@require_GET
def fleet_matrix(request: HttpRequest) -> HttpResponse:
    """Offloaded namespaces x peered clusters: the state of each twin namespace at a glance."""
    clusters = list(Cluster.objects.values_list("cluster_id", flat=True))
    offloaded = Namespace.objects.filter(offloaded=True).defer("offloading_status", "offloading_spec")
    page = Paginator(offloaded, 50).get_page(request.GET.get("page"))
    states: dict[int, dict[str, ClusterOffloading]] = {}
    for row in ClusterOffloading.objects.filter(namespace_id__in=[ns.pk for ns in page]).order_by():
        states.setdefault(row.namespace_id, {})[row.cluster_id] = row
    rows = [(ns, [states.get(ns.pk, {}).get(cluster_id) for cluster_id in clusters]) for ns in page]
    return render(request, "offloading/fleet_matrix.html", {"clusters": clusters, "rows": rows, "page": page})


@login_required
@require_GET
def namespace_detail(request: HttpRequest, name: str) -> HttpResponse:
    namespace = get_object_or_404(Namespace, name=name)
    changes = ChangeRequest.objects.filter(namespace=name)[:10]
    history = StatusTransition.objects.filter(namespace=name)[:30]
    return render(
        request,
        "offloading/namespace_detail.html",
        {
            "namespace": namespace,
            "changes": changes,
            "history": history,
            **status_context(namespace),
            **inventory_context(namespace.name),
            **open_drift(namespace),
            "findings": diagnose(namespace),
        },
    )


@login_required
@require_GET
def namespace_status(request: HttpRequest, name: str) -> HttpResponse:
    """The polled status fragment of a namespace; stops polling (286) once the phase is settled."""
    namespace = get_object_or_404(Namespace, name=name)
    pending = ChangeRequest.objects.filter(namespace=name, state__in=ChangeState.pending()).exists()
    response = render(request, "offloading/_namespace_status.html", {**status_context(namespace), "pending": pending})
    if namespace.status_settled and not pending:
        response.status_code = HttpResponseStopPolling.status_code
    return response
