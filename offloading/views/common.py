"""Helpers shared by the page modules."""

from __future__ import annotations

from collections import Counter
from typing import Any, overload

import yaml
from django.core.paginator import Paginator
from django.db.models import Case, Count, IntegerField, Q, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django_htmx.middleware import HtmxDetails

from liqo_rules import constants as liqo_constants
from offloading.changes import authorize
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.choices import ChangeAction
from offloading.context import current_actor
from offloading.models import Namespace, VirtualNode
from offloading.models.fleet import ManagedRef, current_managed
from offloading.models.inventory import KubeEvent, Pod

# libyaml's emitter when PyYAML was built with it: the same text, many times faster on large selectors.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_DUMPER, sort_keys=False, default_flow_style=False)


def form_status(form: Any) -> int:
    """The status of a page that shows ``form``: 403 when the change was refused as not allowed (the
    message is on the form), 200 otherwise."""
    return 403 if getattr(form, "refusal", None) is Refusal.FORBIDDEN else 200


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it (for type checking)."""

    htmx: HtmxDetails


def forbidden(request: HttpRequest, exc: ChangeRejected, namespace: Namespace | None = None) -> HttpResponse:
    """The 403 page of a change that was refused as not allowed, saying why (nothing was changed)."""
    context = {"reason": " ".join(exc.messages), "namespace": namespace}
    return render(request, "offloading/forbidden.html", context, status=403)


@overload
def gate(request: HttpRequest, target: str | Namespace, action: str | None = None) -> Namespace | HttpResponse: ...
@overload
def gate(request: HttpRequest, target: None, action: str) -> HttpResponse | None: ...
def gate(request: HttpRequest, target: str | Namespace | None, action: str | None = None) -> Any:
    """The one gate of the pages that change something: the request contract's own access check
    (``offloading.changes.authorize``), asked before a form is shown or a POST is read.

    ``target`` a namespace (or its name: 404 when the snapshot has none): the namespace when the user may
    ``action`` it (None: offload it, or edit it when it is offloaded), else the 403 page saying why.
    ``target`` None, a bulk change (it needs the operator role): None when allowed, else the 403 page.
    A refused POST is written to the audit trail (by ``authorize.refuse``, the only writer of that row).
    """
    actor, record = current_actor(), request.method == "POST"
    namespace = (
        get_object_or_404(Namespace.objects.of(current_managed(request)), name=target)
        if isinstance(target, str)
        else target
    )
    try:
        if namespace is None:
            authorize.permit_bulk(actor, "bulk", action or "bulk", record=record)
            return None
        wanted = action or authorize.policy_action(namespace, ChangeAction.OFFLOAD)
        authorize.permit(actor, namespace, wanted, record=record)
    except ChangeRejected as exc:
        return forbidden(request, exc, namespace)
    return namespace


def confirm_page(request: HttpRequest, exc: ChangeRejected, cancel_url: str) -> HttpResponse:
    """The page that asks to confirm a destructive change a button asked for (re-apply, re-apply mine,
    retry a bulk): the reason the request contract gave, and the same POST again with ``confirm``."""
    fields = [
        (k, v) for k, values in request.POST.lists() if k not in ("csrfmiddlewaretoken", "confirm") for v in values
    ]
    context = {"reasons": exc.messages, "fields": fields, "action_url": request.path, "cancel_url": cancel_url}
    return render(request, "offloading/confirm_destructive.html", context)


def confirmed(request: HttpRequest) -> bool:
    """Whether a POST confirms a destructive change (the confirmation page's or a form's ``confirm``)."""
    return request.POST.get("confirm") in ("on", "true", "1")


# How many virtual nodes / namespaces the placeholders are drawn from: a sample, so that a form costs
# the same at any fleet size.
PLACEHOLDER_SAMPLE = 50


def fleet_placeholders(form: Any) -> None:
    """Placeholders that match something real: a label the peered clusters' virtual nodes carry (one
    that tells them apart) for the cluster selector, a label the namespaces carry for a namespace
    selector."""
    if "cluster_selector" in form.fields:
        seen: Counter[tuple[str, str]] = Counter()
        for labels in VirtualNode.objects.of().values_list("labels", flat=True)[:PLACEHOLDER_SAMPLE]:
            for key, value in (labels or {}).items():
                if key not in liqo_constants.VIRTUAL_NODE_STANDARD_LABELS:
                    seen[(key, value)] += 1
        if seen:
            (key, value), _ = seen.most_common(1)[0]
            values = sorted({v for (k, v) in seen if k == key})[:2]
            form.fields["cluster_selector"].widget.attrs["placeholder"] = (
                f"{key} in ({', '.join(values)})" if len(values) > 1 else f"{key}={value}"
            )
    if "namespace_selector" in form.fields:
        counts: Counter[tuple[str, str]] = Counter()
        for labels in Namespace.objects.of().exclude(labels={}).values_list("labels", flat=True)[:PLACEHOLDER_SAMPLE]:
            for key, value in (labels or {}).items():
                if not key.startswith(("kubernetes.io/", "liqo.io/")):
                    counts[(key, value)] += 1
        if counts:
            (key, value), _ = counts.most_common(1)[0]
            form.fields["namespace_selector"].widget.attrs["placeholder"] = f"{key}={value}"


def annotate_inventory(namespaces: Any, managed: ManagedRef = None) -> None:
    """Set ``pods_local``, ``pods_remote`` and ``warnings`` on each namespace of a page of ``managed``'s
    namespaces (two queries)."""
    rows = list(namespaces)
    names = [ns.name for ns in rows]
    pods = {
        row["namespace"]: row
        for row in Pod.objects.of(managed)
        .filter(namespace__in=names, phase="Running")
        .values("namespace")
        .annotate(local=Count("id", filter=Q(cluster_id="")), remote=Count("id", filter=~Q(cluster_id="")))
    }
    warnings = dict(
        KubeEvent.objects.of(managed)
        .filter(namespace__in=names, type="Warning")
        .values_list("namespace")
        .annotate(n=Count("id"))
        .values_list("namespace", "n")
    )
    for ns in rows:
        found: Any = pods.get(ns.name) or {}
        ns.pods_local, ns.pods_remote = found.get("local", 0), found.get("remote", 0)
        ns.warnings = warnings.get(ns.name, 0)


POD_ROWS, EVENT_ROWS = 200, 50  # a page of a namespace's pods and events; the pages say how many there are


def inventory_context(
    namespace_name: str, since: Any = None, request: HttpRequest | None = None, managed: int | None = None
) -> dict[str, Any]:
    """The pods of a namespace (where they run) and its events, warnings first: a page of each
    (``?pods=`` and ``?events=`` in ``request``'s query string), with how many there are in all; of
    managed cluster ``managed`` (pk), else the one ``request`` reads."""
    managed = current_managed(request) if managed is None else managed
    events = KubeEvent.objects.of(managed).filter(namespace=namespace_name)
    if since is not None:
        events = events.filter(last_time__gte=since)
    warning_first = Case(When(type="Warning", then=0), default=1, output_field=IntegerField())
    pods_page = capped(
        Pod.objects.of(managed).filter(namespace=namespace_name).order_by("cluster_id", "name"),
        request,
        "pods",
        POD_ROWS,
    )
    pods = list(pods_page.object_list)
    # A peer that appeared after the pod was written: its node's name tells where the pod runs.
    clusters = dict(
        VirtualNode.objects.of(managed).filter(name__in={p.node_name for p in pods}).values_list("name", "cluster_id")
    )
    for pod in pods:
        pod.cluster_id = pod.cluster_id or clusters.get(pod.node_name, "")
    events_page = capped(events.order_by(warning_first, "-last_time"), request, "events", EVENT_ROWS)
    return {
        "pods": pods,
        "pods_page": pods_page,
        "kube_events": list(events_page.object_list),
        "events_page": events_page,
    }


def split_labels(labels: dict[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """A virtual node's labels that tell clusters apart first; the ones every virtual node carries, folded."""
    standard_keys = liqo_constants.VIRTUAL_NODE_STANDARD_LABELS
    distinctive = sorted((k, v) for k, v in labels.items() if k not in standard_keys)
    standard = sorted((k, v) for k, v in labels.items() if k in standard_keys)
    return distinctive, standard


def capped(items: Any, request: HttpRequest | None, param: str, per_page: int) -> Any:
    """A page of ``items`` for a list that shows at most ``per_page`` rows: the page asked for in the
    query string's ``param`` (the other parameters are kept by its links, see ``_shown.html``), with
    ``param`` and ``query`` set on it so the template can say how many there are and link to the rest."""
    page = Paginator(items, per_page).get_page(request.GET.get(param) if request is not None else None)
    query = request.GET.copy() if request is not None else None
    if query is not None:
        query.pop(param, None)
    page.param = param if request is not None else ""  # type: ignore[attr-defined]
    page.query = query.urlencode() if query is not None else ""  # type: ignore[attr-defined]
    return page
