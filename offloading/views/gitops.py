"""The GitOps hand-off pages: the "Hand off to Git" button of the change and bulk pages posts here; the
page then shows the commit (and every earlier hand-off of the same change or bulk, from the audit trail).

GET shows the hand-offs (anyone signed in may read them, as the change page); POST hands off, with the
same rules as the API (``offloading.api.gitops``): who may change every namespace handed off (the 403
page otherwise, audited), and Git's failures as a banner on this page with the API's status code
(409, or 503 when the Git server cannot be reached or git fails otherwise), never a 500. A hand-off that lands redirects to the
GET page (Post/Redirect/Get), which shows it first.

Per managed cluster (issue 28): the page of a change or bulk is its cluster's (``/m/<name>/...``; the plain
path redirects there, as the change's own page does), and it names the directory of that cluster's
overlays in the repository.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from offloading.changes import authorize
from offloading.changes.errors import ChangeRejected
from offloading.context import Actor, current_actor
from offloading.gitops import handoff, repo
from offloading.gitops.files import FilesError, clean_path
from offloading.governance.decisions import handoff_approvals
from offloading.models import BulkRequest, ChangeRequest
from offloading.switcher import cluster_reverse, elsewhere
from offloading.views.common import forbidden

# The HTTP status of a page whose hand-off failed (the API's, offloading.api.gitops).
UNREACHABLE_STATUS = 503
FAILED_STATUS = 409


def _permit(actor: Actor, prepared: handoff.HandOff) -> None:
    """The API's rule (offloading.api.gitops.permit): the right to change every namespace handed off,
    with its change's action; a bulk also needs the operator role."""
    if prepared.bulk is not None:
        authorize.permit_bulk(actor, prepared.bulk.namespace_selector, "hand off", field="bulk")
    for namespace, change in prepared.namespaces():
        authorize.permit(actor, namespace, authorize.cluster_action(change))


def _page(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    repository = handoff.configured()
    directory = ""
    if repository is not None:
        subject = context.get("change") or context.get("bulk")
        cluster = handoff.cluster_directory(subject.managed_id if subject is not None else None)
        directory = "/".join(p for p in (clean_path(repository.path), cluster) if p)
    context = {"repository": repository, "directory": directory, **context}
    if repository is None and "error" not in context:
        try:
            handoff.repo_settings()
        except repo.GitOpsError as error:
            context["not_configured"] = str(error)
    return render(request, "offloading/handoff.html", context, status=status)


def _managed(prepare: Any) -> list[tuple[str, str]]:
    """The namespaces of the hand-off managed from Git, with who (none when it has no files)."""
    try:
        return sorted(prepare().managed_by().items())
    except FilesError:
        return []


def _post(request: HttpRequest, prepare: Any, back: str, pk: int, context: dict[str, Any]) -> HttpResponse:
    actor = current_actor()
    try:
        prepared = prepare()
    except FilesError as error:
        return _page(request, {**context, "error": str(error)}, FAILED_STATUS)
    try:
        _permit(actor, prepared)
    except ChangeRejected as exc:
        return forbidden(request, exc)
    try:
        handoff.hand_off(prepared, actor, approvals=handoff_approvals(prepared.changes))
    except repo.GitOpsError as error:
        unreachable = isinstance(error, repo.Unreachable) or type(error) is repo.GitOpsError
        status = UNREACHABLE_STATUS if unreachable else FAILED_STATUS
        return _page(request, {**context, "error": str(error), "error_reason": error.reason}, status)
    return redirect(cluster_reverse(request, back, pk=pk))


@login_required
@require_http_methods(["GET", "POST"])
def change_handoff(request: HttpRequest, pk: int) -> HttpResponse:
    change = get_object_or_404(ChangeRequest, pk=pk)
    moved = elsewhere(request, change.managed_id)
    if moved is not None:
        return moved  # its cluster's page (a POST lands there as a GET: nothing is handed off)
    context = {"change": change, "what": f"change #{change.pk}", "commits": handoff.commits_of_change(change)}
    context["managed"] = _managed(lambda: handoff.of_change(change))
    if request.method == "POST":
        return _post(request, lambda: handoff.of_change(change), "offloading:change_handoff", pk, context)
    return _page(request, context)


@login_required
@require_http_methods(["GET", "POST"])
def bulk_handoff(request: HttpRequest, pk: int) -> HttpResponse:
    bulk = get_object_or_404(BulkRequest, pk=pk)
    moved = elsewhere(request, bulk.managed_id)
    if moved is not None:
        return moved
    context = {"bulk": bulk, "what": f"bulk #{bulk.pk}", "commits": handoff.commits_of_bulk(bulk)}
    context["managed"] = _managed(lambda: handoff.of_bulk(bulk))
    if request.method == "POST":
        return _post(request, lambda: handoff.of_bulk(bulk), "offloading:bulk_handoff", pk, context)
    return _page(request, context)
