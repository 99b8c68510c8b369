"""Pages that read the snapshot: overview, clusters, namespaces, matrix, namespace detail, audit."""

from __future__ import annotations

from html import escape

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from access import policy
from offloading.choices import ChangeState
from offloading.filtersets import NamespaceFilterSet
from offloading.gitops.managed import badges, detection_of
from offloading.insight.diagnosis import diagnose
from offloading.models import (
    ChangeRequest,
    Cluster,
    ClusterOffloading,
    Namespace,
    StatusTransition,
    VirtualNode,
)
from offloading.models.fleet import current_managed
from offloading.snapshot.drift import open_drift
from offloading.switcher import base_of, cluster_name
from offloading.views.common import (
    HtmxHttpRequest,
    annotate_inventory,
    capped,
    inventory_context,
)
from offloading.views.rows import (
    ClusterRow,
    ListedNamespace,
    VirtualNodeCell,
    namespace_row,
    rendered,
    selected_clusters,
    status_context,
)
from offloading.views.tones import tone

CLUSTERS_PER_PAGE = 50
MATRIX_COLUMNS = 20  # what fits across 1440 px
HISTORY_ROWS, CHANGE_ROWS = 30, 10  # a namespace page's status history (a page of it) and recent changes


@login_required
@require_GET
def cluster_list(request: HttpRequest) -> HttpResponse:
    """The peers, 50 a page: only the page's clusters are read with their virtual nodes and counts,
    JSON columns as text (a row is rendered again only when its values changed: views.rows)."""
    managed = current_managed(request)
    clusters = (
        Cluster.objects.of(managed)
        .order_by("cluster_id")
        .values_list(
            "cluster_id", "role", "networking_status", "authentication_status", "offloading_status", _text("modules")
        )
    )
    page = Paginator(clusters, CLUSTERS_PER_PAGE).get_page(request.GET.get("page"))
    ids = [c[0] for c in page]
    hosted = dict(
        ClusterOffloading.objects.of(managed)
        .filter(selected=True, cluster_id__in=ids)
        .order_by()
        .values("cluster_id")
        .annotate(n=Count("id"))
        .values_list("cluster_id", "n")
    )
    nodes: dict[str, list[VirtualNodeCell]] = {}
    for cluster_id, *cell in (
        VirtualNode.objects.of(managed)
        .filter(cluster_id__in=ids)
        .values_list("cluster_id", "name", "has_node", "healthy", _text("labels"), _text("capacity"))
    ):
        nodes.setdefault(cluster_id, []).append(VirtualNodeCell(*cell))
    rows = [
        ClusterRow(
            cluster_id, role, net, auth, offload, modules, tuple(nodes.get(cluster_id, ())), hosted.get(cluster_id, 0)
        )
        for cluster_id, role, net, auth, offload, modules in page
    ]
    context = {"rows": rows, "page": page, "body": rendered("offloading/_cluster_row.html", rows, base_of(request))}
    return render(request, "offloading/cluster_list.html", context)


def _text(field: str) -> Cast:
    """A JSON column as its text: a row's key, decoded only when the row has to be rendered."""
    return Cast(field, output_field=TextField())


@login_required
@require_GET
@vary_on_headers("HX-Request")
def namespace_list(request: HtmxHttpRequest) -> HttpResponse:
    managed = current_managed(request)
    filterset = NamespaceFilterSet(request.GET, queryset=Namespace.objects.of(managed))
    # An invalid filter shows its error and no rows (rather than silently ignoring the filter).
    queryset = filterset.qs if filterset.is_valid() else Namespace.objects.none()
    page = Paginator(ListedNamespace.values(queryset), 50).get_page(request.GET.get("page"))
    page.object_list = [ListedNamespace(*values) for values in page.object_list]
    annotate_inventory(page.object_list, managed)
    selected = selected_clusters([ns.pk for ns in page.object_list])
    user, cluster = request.user, cluster_name(request)
    rows = [
        namespace_row(
            ns,
            *selected.get(ns.pk, ((), 0)),
            policy.can_change(user, ns.name, ns.labels, policy.default_action(ns), cluster=cluster),
        )
        for ns in page.object_list
    ]
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "filterset": filterset,
        "page": page,
        "query": query.urlencode(),
        "phase_counts": {} if request.htmx else _phase_counts(managed),  # the table alone does not show them
        "body": rendered("offloading/_namespace_row.html", rows, base_of(request)),
    }
    template = "offloading/_namespace_table.html" if request.htmx else "offloading/namespace_list.html"
    return render(request, template, context)


def _phase_counts(managed: int) -> dict[str, int]:
    """Namespaces per phase, and the ones not offloaded: one scan of the (offloaded, phase) index."""
    counts = {"not offloaded": 0}
    grouped = (
        Namespace.objects.of(managed).order_by().values_list("offloaded", "offloading_phase").annotate(n=Count("id"))
    )
    for offloaded, phase, n in grouped:
        key = phase if offloaded else "not offloaded"
        counts[key] = counts.get(key, 0) + n
    return counts


@login_required
@require_GET
def fleet_matrix(request: HttpRequest) -> HttpResponse:
    """Offloaded namespaces x peered clusters: the state of each twin namespace at a glance, 50
    namespaces by 20 clusters a page (``page`` and ``columns``)."""
    managed = current_managed(request)
    columns = Paginator(
        Cluster.objects.of(managed).order_by("cluster_id").values_list("cluster_id", flat=True), MATRIX_COLUMNS
    )
    column_page = columns.get_page(request.GET.get("columns"))
    clusters = list(column_page)
    offloaded = Namespace.objects.of(managed).filter(offloaded=True).defer("offloading_status", "offloading_spec")
    page = Paginator(offloaded, 50).get_page(request.GET.get("page"))
    states: dict[int, dict[str, ClusterOffloading]] = {}
    in_view = ClusterOffloading.objects.filter(namespace_id__in=[ns.pk for ns in page], cluster_id__in=clusters)
    for row in in_view.order_by().only("namespace_id", "cluster_id", "state", "selected"):
        states.setdefault(row.namespace_id, {})[row.cluster_id] = row
    rows = [(ns, matrix_cells(clusters, states.get(ns.pk, {}))) for ns in page]
    context = {
        "clusters": clusters,
        "rows": rows,
        "page": page,
        "column_page": column_page,
        "cluster_count": columns.count,
    }
    return render(request, "offloading/fleet_matrix.html", context)


_MARKS = {"NamespaceCreated": "✓", "CreationLoopBackOff": "✗", "Terminating": "…"}


def matrix_cells(clusters: list[str], states: dict[str, ClusterOffloading]) -> str:
    """One row of matrix cells as HTML, built here rather than by the template engine: the state's
    colour, the cluster and state on hover, a mark.

    Measured (issue 26: markup in templates unless that costs more than 20 % of the page): at 10,000
    namespaces / 200 peers a matrix page (50 namespaces x 20 clusters) takes 21-24 ms of CPU with the
    cells built here (4-6 % of it). The same cells as a template partial (one include for the table,
    each cell a tuple unpacked by the loop, an empty cell without lookups, the cached loader) took
    33 ms, 37-43 % of the page, and drew the same pixels. Over 20 %: the cells stay here."""
    cells = []
    for cluster_id in clusters:
        row = states.get(cluster_id)
        if row is None:
            cells.append(("cell", "", ""))
            continue
        title = f"{cluster_id}: {row.state}" + ("" if row.selected else " (not selected)")
        cells.append((f"cell {tone(row.state)}", title, _MARKS.get(row.state, "•")))
    # html.escape (quotes too) rather than format_html_join: a page holds 1,250 cells.
    return mark_safe("".join(f'<td class="{escape(c)}" title="{escape(t)}">{m}</td>' for c, t, m in cells))  # noqa: S308


@login_required
@require_GET
def namespace_detail(request: HttpRequest, name: str) -> HttpResponse:
    namespace = get_object_or_404(Namespace.objects.of(current_managed(request)), name=name)
    changes = ChangeRequest.objects.filter(managed_id=namespace.managed_id, namespace=name)
    history = capped(
        StatusTransition.objects.of(namespace.managed_id).filter(namespace=name), request, "history", HISTORY_ROWS
    )
    return render(
        request,
        "offloading/namespace_detail.html",
        {
            "namespace": namespace,
            "changes": changes[:CHANGE_ROWS],
            "changes_total": changes.count(),
            "history": history.object_list,
            "history_page": history,
            **status_context(namespace, base_of(request)),
            **inventory_context(namespace.name, request=request),
            **open_drift(namespace),
            "findings": diagnose(namespace, notes=True),
            "gitops": badges(detection_of(namespace)),
        },
    )


@login_required
@require_GET
def namespace_status(request: HttpRequest, name: str) -> HttpResponse:
    """The polled status fragment of a namespace; stops polling (286) once the phase is settled."""
    # Not the raw status: Liqo's conditions for every peer (50 kB at 200 peers), which the rows show.
    namespace = get_object_or_404(
        Namespace.objects.of(current_managed(request)).defer("offloading_status", "offloading_spec"), name=name
    )
    pending = ChangeRequest.objects.filter(
        managed_id=namespace.managed_id, namespace=name, state__in=ChangeState.pending()
    ).exists()
    context = {**status_context(namespace, base_of(request)), "pending": pending}
    response = render(request, "offloading/_namespace_status.html", context)
    if namespace.status_settled and not pending:
        response.status_code = HttpResponseStopPolling.status_code
    return response
