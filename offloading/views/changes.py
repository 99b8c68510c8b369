"""Offload, edit and unoffload one namespace (with the live preview), and the change pages."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from access.impersonation import identity_per_cluster
from liqo_rules.constants import REMOTE, SCHEDULING_LABEL
from liqo_rules.spec import FIELD_POD, apply_defaults
from offloading.changes.checks import validate
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.merge import three_way
from offloading.changes.requests import reapply, request_offload, request_unoffload
from offloading.choices import ChangeAction, ChangeState
from offloading.cluster import twins
from offloading.context import current_actor
from offloading.forms import MAPPING_HELP, POD_HELP, OffloadForm, UnoffloadForm
from offloading.models import (
    ChangeRequest,
    Namespace,
)
from offloading.models.fleet import current_managed
from offloading.switcher import base_of, cluster_reverse, elsewhere
from offloading.views.common import (
    HtmxHttpRequest,
    confirm_page,
    confirmed,
    dump_yaml,
    fleet_placeholders,
    form_status,
    gate,
    inventory_context,
)
from offloading.views.previewhtml import cluster_table
from offloading.views.rows import status_context
from offloading.whatif.destructive import is_destructive
from offloading.whatif.impact import field_changes
from offloading.whatif.pods import pod_impact, running_pods
from offloading.whatif.preview import preview as compute_preview


def _offload_context(form: OffloadForm) -> dict[str, Any]:
    namespace = form.namespace
    return {
        "namespace": namespace,
        "form": form,
        "mapping_help": MAPPING_HELP,
        "pod_help": POD_HELP,
        "pending": ChangeRequest.objects.of(namespace.managed_id)
        .filter(namespace=namespace.name, state__in=ChangeState.pending())
        .first(),
    }


@login_required
@require_http_methods(["GET", "POST"])
def offload(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """Offload a namespace, or edit its offloading."""
    namespace = gate(request, name)
    if isinstance(namespace, HttpResponse):
        return namespace
    if request.method == "POST":
        form = OffloadForm(request.POST, namespace=namespace)
        if form.is_valid() and form.spec is not None:
            try:
                change = request_offload(
                    namespace.name,
                    form.spec,
                    current_actor(),
                    expected_generation=form.cleaned_data.get("expected_generation"),
                    label_namespace=bool(form.cleaned_data.get("label_namespace")),
                    confirmed=bool(form.cleaned_data.get("confirm")),
                    gitops_override=bool(form.cleaned_data.get("gitops_override")),
                    managed=namespace.managed_id,
                )
            except ChangeRejected as exc:
                current = (
                    Namespace.objects.of(namespace.managed_id).filter(name=namespace.name).first()
                    if exc.refusal is Refusal.STALE
                    else None
                )
                if current is not None:
                    # Not a dead end: the form again, on the version the snapshot holds now, with what
                    # the other writer changed merged in (and a choice where both changed a field).
                    form = form.rebased(current, "; ".join(exc.messages))
                    namespace = current
                else:
                    form.add_refusal(exc)
            else:
                url = cluster_reverse(request, "offloading:change_detail", change.pk)
                return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    else:
        form = OffloadForm(namespace=namespace)
    fleet_placeholders(form)
    context = _offload_context(form)
    context.update(preview_context(form, request) if request.method == "POST" and form.is_bound else {})
    return render(request, "offloading/offload_form.html", context, status=form_status(form))


@login_required
@require_POST
def offload_preview(request: HttpRequest, name: str) -> HttpResponse:
    """Live preview while typing: matched clusters and why, the manifest, the remote name, the pod
    mutation, what a destructive edit deletes, and validation errors (Liqo's rules, asked here as the
    request contract asks them on submit). Always 200: errors are part of the preview."""
    # Not the observed status: per cluster, it grows with the peers, and the preview never shows it.
    namespace = get_object_or_404(Namespace.objects.of(current_managed(request)).defer("offloading_status"), name=name)
    form = OffloadForm(request.POST, namespace=namespace)
    form.previewing = True
    if form.is_valid() and form.spec is not None:
        checked = validate(namespace, form.spec)
        form.add_problems(checked.errors)
        form.warnings = checked.warnings
        form.spec = checked.spec
    context = {"form": form, "namespace": namespace, **preview_context(form, request)}
    if form.errors:
        context["destructive"] = None  # said once the spec is one Liqo takes
    # The preview, and the confirmation box of the form out of band (it is inside the form, the preview is not).
    html = render_to_string("offloading/_preview.html", context, request)
    html += render_to_string("offloading/_destructive.html", {**context, "oob": True}, request)
    return HttpResponse(html)


# Above this many expressions the preview prints the selector once (in the manifest), not three times.
REPEATED_YAML_EXPRESSIONS = 500


def _expressions(selector: dict[str, Any]) -> int:
    return sum(len(term.get("matchExpressions") or []) for term in selector.get("nodeSelectorTerms") or [])


def preview_context(form: OffloadForm, request: HttpRequest) -> dict[str, Any]:
    context: dict[str, Any] = {"form": form, "spec": form.spec}
    if form.spec is None:
        return context
    # A new offloading's remote name is also checked on the selected peers that are managed clusters,
    # asked as each sees the signed-in user (its impersonation and groups, as the "Across the domain" section asks).
    identity = None if form.namespace.offloaded else identity_per_cluster(request.user.get_username())
    preview = compute_preview(form.namespace, form.spec, providers=True, identity=identity)
    namespace = form.namespace
    # Every field the edit changes, before -> after (the same words as the bulk preview).
    changes = field_changes(namespace.offloading_spec, form.spec) if namespace.offloaded else []
    if form.cleaned_data.get("label_namespace") and (namespace.labels or {}).get(SCHEDULING_LABEL) != "true":
        before = (namespace.labels or {}).get(SCHEDULING_LABEL) or "(none)"
        changes.append((f"namespace label {SCHEDULING_LABEL}", before, "true"))
    pod = preview.pod_after
    selector = form.spec.get("clusterSelector") or {"nodeSelectorTerms": []}
    size = _expressions(selector)
    context.update(
        {
            # Built in Python: the selected clusters a row each, the excluded ones grouped by reason.
            "cluster_table": cluster_table(preview.clusters, preview.rooms),
            "selected_count": len(preview.selected),
            "target_count": preview.target_count,
            "gains": preview.gains,
            "losses": preview.losses,
            # One string each (escaped once by the template), not a filter over up to 200 ids.
            "gains_text": ", ".join(preview.gains),
            "losses_text": ", ".join(preview.losses),
            "pod_impact": preview.pod_impact,
            "nearly_full": preview.nearly_full,
            # The manifest holds the whole selector; a very large one is not printed twice more.
            "selector_size": size,
            "node_selector_yaml": dump_yaml(selector) if size <= REPEATED_YAML_EXPRESSIONS else "",
            "manifest": preview.manifest,
            "remote_name": preview.remote_namespace_name,
            "collisions": [c.message() for c in preview.collisions],
            # On a managed provider: a name taken there (Liqo would fail) is a problem, one that could not
            # be checked a note; one shared with another namespace's twin is said once (by the snapshot's
            # collision above when it knows it).
            "remote_taken": [r.message() for r in preview.remote_checks if r.verdict == twins.TAKEN],
            "remote_shared": []
            if preview.collisions
            else [r.message() for r in preview.remote_checks if r.verdict == twins.SHARED],
            "remote_unchecked": [r.message() for r in preview.remote_checks if r.verdict == twins.UNCHECKED],
            "runtime_notes": preview.runtime_notes,
            "local_cluster_id": preview.local_cluster_id,
            "pod_preview": {
                "changed": preview.pod_changed,
                "yaml": dump_yaml({k: pod["spec"][k] for k in ("affinity", "tolerations") if k in pod["spec"]})
                if size <= REPEATED_YAML_EXPRESSIONS
                else "",
            },
            "warnings": form.warnings,
            "selector_notes": form.selector_notes,
            "field_changes": changes,
            # Pods already running here stay (affinity is checked only at scheduling) until recreated.
            "to_remote": namespace.offloaded
            and apply_defaults(namespace.offloading_spec or {}).get(FIELD_POD) != REMOTE
            and form.spec.get(FIELD_POD) == REMOTE,
            # What the edit deletes: the request contract asks for confirmation of the same reason.
            "destructive": is_destructive(namespace, ChangeAction.UPDATE, form.spec),
        }
    )
    return context


@login_required
@require_http_methods(["GET", "POST"])
def unoffload(request: HttpRequest, name: str) -> HttpResponse:
    namespace = gate(request, name, "unoffload")
    if isinstance(namespace, HttpResponse):
        return namespace
    if request.method == "POST":
        form = UnoffloadForm(request.POST, namespace=namespace)
        if form.is_valid():
            try:
                change = request_unoffload(
                    namespace.name,
                    current_actor(),
                    expected_generation=form.cleaned_data.get("expected_generation"),
                    confirmed=form.confirmed,
                    gitops_override=bool(form.cleaned_data.get("gitops_override")),
                    managed=namespace.managed_id,
                )
            except ChangeRejected as exc:
                form.add_refusal(exc)
            else:
                return redirect(cluster_reverse(request, "offloading:change_detail", pk=change.pk))
    else:
        form = UnoffloadForm(namespace=namespace)
    selected = namespace.cluster_states.filter(selected=True) if namespace.offloaded else []
    running = running_pods([namespace.name]).get(namespace.name, {})
    impact = pod_impact(running, [], namespace.offloading_spec, None, unoffload=True)
    context = {
        "namespace": namespace,
        "form": form,
        "selected": selected,
        "pod_impact": impact,
        "destructive": is_destructive(namespace, ChangeAction.UNOFFLOAD, None),
    }
    return render(request, "offloading/unoffload_confirm.html", context, status=form_status(form))


@login_required
@require_GET
def change_list(request: HttpRequest) -> HttpResponse:
    changes = ChangeRequest.objects.of(current_managed(request))
    state = request.GET.get("state")
    if state in ChangeState.values:
        changes = changes.filter(state=state)
    page = Paginator(changes, 50).get_page(request.GET.get("page"))
    return render(request, "offloading/change_list.html", {"page": page, "states": ChangeState.choices, "state": state})


@login_required
@require_GET
def change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    change = get_object_or_404(ChangeRequest, pk=pk)
    moved = elsewhere(request, change.managed_id)
    if moved is not None:
        return moved  # its page is its cluster's, where its links lead
    namespace = Namespace.objects.of(change.managed_id).filter(name=change.namespace).first()
    return render(
        request,
        "offloading/change_detail.html",
        {
            "change": change,
            "namespace": namespace,
            "desired_yaml": dump_yaml(change.desired_spec) if change.desired_spec else "",
            # The same per-cluster rows as the namespace page (one partial renders them both).
            **(status_context(namespace, base_of(request)) if namespace else {}),
            **_merge_context(change, namespace),
            # The events since the change was asked for (Liqo's warnings about what it did).
            **inventory_context(change.namespace, since=change.created_at, managed=change.managed_id),
        },
    )


def _merge_context(change: ChangeRequest, namespace: Namespace | None) -> dict[str, Any]:
    """For a change in conflict: base, theirs (the snapshot now) and mine, field by field."""
    if change.state != ChangeState.CONFLICT or change.action == ChangeAction.UNOFFLOAD or namespace is None:
        return {}
    if not namespace.offloaded:
        return {"merge_gone": True}
    fields = three_way(change.base_spec, namespace.offloading_spec, change.desired_spec or {})
    return {"merge_fields": fields, "merge_conflicts": [f for f in fields if f.conflict]}


@login_required
@require_GET
def change_status(request: HttpRequest, pk: int) -> HttpResponse:
    """Polled fragment: the change's state, then the namespace's phase; 286 once both are final."""
    change = get_object_or_404(ChangeRequest, pk=pk)
    namespace = Namespace.objects.of(change.managed_id).filter(name=change.namespace).first()
    context = {
        "change": change,
        **(status_context(namespace, base_of(request)) if namespace else {"namespace": None}),
        **_merge_context(change, namespace),
    }
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
    conflicted = get_object_or_404(ChangeRequest, pk=pk)
    namespace = Namespace.objects.of(conflicted.managed_id).filter(name=conflicted.namespace).first()
    if namespace is not None:  # one that is gone is the contract's refusal (not found), on the change's page
        refused = gate(request, namespace, "reapply")
        if isinstance(refused, HttpResponse):
            return refused
    choices = {key.removeprefix("choice_"): str(request.POST.get(key)) for key in request.POST if key[:7] == "choice_"}
    try:
        change = reapply(pk, current_actor(), choices, confirmed=confirmed(request))
    except ChangeRejected as exc:
        if exc.refusal is Refusal.UNCONFIRMED:
            return confirm_page(request, exc, cluster_reverse(request, "offloading:change_detail", pk))
        for message in exc.messages:
            messages.error(request, message)
        return redirect(cluster_reverse(request, "offloading:change_detail", pk=pk))
    return redirect(cluster_reverse(request, "offloading:change_detail", pk=change.pk))
