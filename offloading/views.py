"""Pages and htmx fragments. Every page reads the snapshot; nothing here calls the Kubernetes API."""

from __future__ import annotations

from typing import Any

import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Case, Count, Prefetch, Q, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from . import services
from .choices import ChangeState
from .context import current_actor
from .filtersets import NamespaceFilterSet
from .forms import MAPPING_HELP, POD_HELP, BulkForm, OffloadForm, UnoffloadForm
from .liqo import constants as liqo_constants
from .models import (
    AuditEvent,
    BulkRequest,
    ChangeRequest,
    Cluster,
    ClusterOffloading,
    Namespace,
    StatusTransition,
    VirtualNode,
)


def _dump_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return redirect("offloading:namespace_list")


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
            "virtual_nodes": [(vn, *_split_labels(vn.labels)) for vn in nodes.get(c.cluster_id, [])],
            "hosted": hosted.get(c.cluster_id, 0),
        }
        for c in clusters
    ]
    return render(request, "offloading/cluster_list.html", {"rows": rows})


@login_required
@require_GET
@vary_on_headers("HX-Request")
def namespace_list(request: HttpRequest) -> HttpResponse:
    filterset = NamespaceFilterSet(request.GET, queryset=Namespace.objects.all())
    selected_states = Prefetch(
        "cluster_states", queryset=ClusterOffloading.objects.filter(selected=True).order_by("cluster_id")
    )
    # An invalid filter shows its error and no rows (rather than silently ignoring the filter).
    queryset = filterset.qs if filterset.is_valid() else Namespace.objects.none()
    page = Paginator(queryset.defer("offloading_status").prefetch_related(selected_states), 50).get_page(
        request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    context = {"filterset": filterset, "page": page, "query": query.urlencode(), "phase_counts": _phase_counts()}
    template = "offloading/_namespace_table.html" if request.htmx else "offloading/namespace_list.html"
    return render(request, template, context)


def _split_labels(labels: dict[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The labels that tell clusters apart first; the ones every virtual node carries, folded."""
    standard_keys = liqo_constants.VIRTUAL_NODE_STANDARD_LABELS
    distinctive = sorted((k, v) for k, v in labels.items() if k not in standard_keys)
    standard = sorted((k, v) for k, v in labels.items() if k in standard_keys)
    return distinctive, standard


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
        {"namespace": namespace, "changes": changes, "history": history, **_status_context(namespace)},
    )


def _status_context(namespace: Namespace) -> dict[str, Any]:
    rows = list(namespace.cluster_states.all()) if namespace.offloaded else []
    return {"namespace": namespace, "cluster_rows": rows}


@login_required
@require_GET
def namespace_status(request: HttpRequest, name: str) -> HttpResponse:
    """The polled status fragment of a namespace; stops polling (286) once the phase is settled."""
    namespace = get_object_or_404(Namespace, name=name)
    pending = ChangeRequest.objects.filter(namespace=name, state__in=ChangeState.pending()).exists()
    response = render(request, "offloading/_namespace_status.html", {**_status_context(namespace), "pending": pending})
    if namespace.status_settled and not pending:
        response.status_code = HttpResponseStopPolling.status_code
    return response


def _offload_context(form: OffloadForm) -> dict[str, Any]:
    namespace = form.namespace
    return {
        "namespace": namespace,
        "form": form,
        "mapping_help": MAPPING_HELP,
        "pod_help": POD_HELP,
        "pending": ChangeRequest.objects.filter(namespace=namespace.name, state__in=ChangeState.pending()).first(),
    }


@login_required
@require_http_methods(["GET", "POST"])
def offload(request: HttpRequest, name: str) -> HttpResponse:
    """Offload a namespace, or edit its offloading."""
    namespace = get_object_or_404(Namespace, name=name)
    if request.method == "POST":
        form = OffloadForm(request.POST, namespace=namespace)
        if form.is_valid() and form.spec is not None and _dry_run_passes(form):
            try:
                change = services.request_offload(
                    namespace.name,
                    form.spec,
                    current_actor(),
                    expected_generation=form.cleaned_data.get("expected_generation"),
                    label_namespace=bool(form.cleaned_data.get("label_namespace")),
                )
            except services.ChangeRejected as exc:
                _reject_into(form, exc)
            else:
                url = reverse("offloading:change_detail", args=[change.pk])
                return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    else:
        form = OffloadForm(namespace=namespace)
    context = _offload_context(form)
    context.update(preview_context(form) if request.method == "POST" else {})
    return render(request, "offloading/offload_form.html", context)


def _dry_run_passes(form: OffloadForm) -> bool:
    """The optional server-side dry-run: a denial by the API server or Liqo's webhook goes on the form.
    An unreachable API server does not block: the change is queued and applied when it is back."""
    if not settings.LIQO_DASH["DRY_RUN_ON_SUBMIT"] or form.spec is None:
        return True
    result = services.dry_run(form.namespace.name, form.spec)
    for message in result.errors:
        form.add_error(None, f"The API server refused this change: {message}")
    return not result.errors


@login_required
@require_POST
def offload_preview(request: HttpRequest, name: str) -> HttpResponse:
    """Live preview while typing: matched clusters and why, the manifest, the remote name, the pod
    mutation, and validation errors. Always 200: errors are part of the preview."""
    namespace = get_object_or_404(Namespace, name=name)
    form = OffloadForm(request.POST, namespace=namespace)
    form.is_valid()
    return render(request, "offloading/_preview.html", {"form": form, "namespace": namespace, **preview_context(form)})


def preview_context(form: OffloadForm) -> dict[str, Any]:
    context: dict[str, Any] = {"form": form, "spec": form.spec}
    if form.spec is None:
        return context
    preview = services.preview(form.namespace, form.spec)
    clusters = {c.cluster_id: c for c in Cluster.objects.all()}
    for row in preview.clusters:
        row["cluster"] = clusters.get(row["cluster_id"])
    pod = preview.pod_after
    context.update(
        {
            "cluster_rows": preview.clusters,
            "selected_count": len(preview.selected),
            "target_count": preview.target_count,
            "gains": preview.gains,
            "losses": preview.losses,
            "node_selector_yaml": _dump_yaml(form.spec.get("clusterSelector") or {"nodeSelectorTerms": []}),
            "manifest": preview.manifest,
            "remote_name": preview.remote_namespace_name,
            "local_cluster_id": preview.local_cluster_id,
            "pod_preview": {
                "changed": preview.pod_changed,
                "yaml": _dump_yaml({k: pod["spec"][k] for k in ("affinity", "tolerations") if k in pod["spec"]}),
            },
            "warnings": form.warnings,
            "selector_notes": form.selector_notes,
        }
    )
    return context


@login_required
@require_http_methods(["GET", "POST"])
def unoffload(request: HttpRequest, name: str) -> HttpResponse:
    namespace = get_object_or_404(Namespace, name=name)
    if request.method == "POST":
        form = UnoffloadForm(request.POST, namespace=namespace)
        if form.is_valid():
            try:
                change = services.request_unoffload(
                    namespace.name, current_actor(), expected_generation=form.cleaned_data.get("expected_generation")
                )
            except services.ChangeRejected as exc:
                _reject_into(form, exc)
            else:
                return redirect("offloading:change_detail", pk=change.pk)
    else:
        form = UnoffloadForm(namespace=namespace)
    selected = namespace.cluster_states.filter(selected=True) if namespace.offloaded else []
    return render(
        request, "offloading/unoffload_confirm.html", {"namespace": namespace, "form": form, "selected": selected}
    )


@login_required
@require_GET
def change_list(request: HttpRequest) -> HttpResponse:
    changes = ChangeRequest.objects.all()
    state = request.GET.get("state")
    if state in ChangeState.values:
        changes = changes.filter(state=state)
    page = Paginator(changes, 50).get_page(request.GET.get("page"))
    return render(request, "offloading/change_list.html", {"page": page, "states": ChangeState.choices, "state": state})


@login_required
@require_GET
def change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    change = get_object_or_404(ChangeRequest, pk=pk)
    namespace = Namespace.objects.filter(name=change.namespace).first()
    return render(
        request,
        "offloading/change_detail.html",
        {
            "change": change,
            "namespace": namespace,
            "desired_yaml": _dump_yaml(change.desired_spec) if change.desired_spec else "",
        },
    )


@login_required
@require_GET
def change_status(request: HttpRequest, pk: int) -> HttpResponse:
    """Polled fragment: the change's state, then the namespace's phase; 286 once both are final."""
    change = get_object_or_404(ChangeRequest, pk=pk)
    namespace = Namespace.objects.filter(name=change.namespace).first()
    context = {"change": change, **(_status_context(namespace) if namespace else {"namespace": None})}
    response = render(request, "offloading/_change_status.html", context)
    if change.is_terminal:
        converged = change.state != ChangeState.APPLIED or namespace is None or namespace.status_settled
        if converged:
            response.status_code = HttpResponseStopPolling.status_code
    return response


@login_required
@require_POST
def change_reapply(request: HttpRequest, pk: int) -> HttpResponse:
    """Resolve a conflict: ask for the same change again, based on the current version."""
    try:
        change = services.reapply(pk, current_actor())
    except services.ChangeRejected as exc:
        for field_messages in exc.errors.values():
            for message in field_messages:
                messages.error(request, message)
        return redirect("offloading:change_detail", pk=pk)
    return redirect("offloading:change_detail", pk=change.pk)


@login_required
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    events = AuditEvent.objects.select_related("change")
    q = request.GET.get("q", "").strip()
    if q:
        events = events.filter(Q(namespace__icontains=q) | Q(user_name__icontains=q))
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    return render(request, "offloading/audit_list.html", {"page": page, "q": q})


def _reject_into(form: Any, exc: services.ChangeRejected, field: str | None = None) -> None:
    """Put a service's refusal on the form (on ``field``, or as a form-wide error)."""
    for field_messages in exc.errors.values():
        for message in field_messages:
            form.add_error(field, message)


def _bulk_call(form: BulkForm, service: Any) -> Any:
    """Call ``services.plan_bulk`` or ``services.request_bulk`` with the form's data; None (and the
    errors on the selector field) when the service refuses."""
    data = form.cleaned_data
    try:
        return service(
            data["action"],
            data["namespace_selector"],
            form.spec,
            current_actor(),
            label_namespace=bool(data.get("label_namespace")),
        )
    except services.ChangeRejected as exc:
        _reject_into(form, exc, "namespace_selector")
        return None


@login_required
@require_http_methods(["GET", "POST"])
def bulk(request: HttpRequest) -> HttpResponse:
    form = BulkForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        created = _bulk_call(form, services.request_bulk)
        if created is not None:
            return redirect("offloading:bulk_detail", pk=created.pk)
    return render(request, "offloading/bulk_form.html", {"form": form})


@login_required
@require_POST
def bulk_preview(request: HttpRequest) -> HttpResponse:
    form = BulkForm(request.POST)
    context: dict[str, Any] = {"form": form}
    if form.is_valid():
        context["plan"] = _bulk_call(form, services.plan_bulk)
    return render(request, "offloading/_bulk_preview.html", context)


@login_required
@require_GET
def bulk_detail(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(BulkRequest, pk=pk)
    return render(request, "offloading/bulk_detail.html", {"bulk": item, "progress": item.progress()})


BULK_ROWS = 100


@login_required
@require_GET
def bulk_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """Polled progress bar; stops polling once every change of the bulk request is terminal."""
    item = get_object_or_404(BulkRequest, pk=pk)
    progress = item.progress()
    # The unfinished and unsuccessful changes first; the table is capped so large bulks stay cheap.
    changes = item.changes.annotate(done=Case(When(state=ChangeState.APPLIED, then=1), default=0)).order_by(
        "done", "namespace"
    )[:BULK_ROWS]
    response = render(
        request,
        "offloading/_bulk_progress.html",
        {"bulk": item, "progress": progress, "changes": changes, "row_limit": BULK_ROWS},
    )
    if progress["done"] >= progress["total"]:
        response.status_code = HttpResponseStopPolling.status_code
    return response
