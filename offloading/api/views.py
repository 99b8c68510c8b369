"""REST API views: short viewsets over the snapshot; writes go through the services (the outbox)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from access import roles
from access.impersonation import identity_per_cluster
from offloading.api.errors import check_query_parameters, if_match_generation
from offloading.api.renderers import PreviewJSONRenderer
from offloading.api.serializers import (
    GITOPS_OVERRIDE_HELP,
    ChangeRequestSerializer,
    ClusterSerializer,
    NamespaceDetailSerializer,
    NamespacePreviewSerializer,
    NamespaceSerializer,
    OffloadSerializer,
    SnapshotSerializer,
    camel,
)
from offloading.api.status import refusal_response
from offloading.changes.checks import validate
from offloading.changes.errors import ChangeRejected
from offloading.changes.requests import request_offload, request_unoffload
from offloading.choices import ChangeAction
from offloading.context import current_actor
from offloading.filtersets import NamespaceFilterSet
from offloading.models import (
    Cluster,
    ClusterOffloading,
    Namespace,
    SnapshotState,
    VirtualNode,
)
from offloading.models.fleet import ManagedRef, current_managed
from offloading.switcher import unknown_cluster
from offloading.whatif.destructive import is_destructive
from offloading.whatif.preview import preview

# The preview's answer is large at the selector limits: JSON through PreviewJSONRenderer (the same bytes).
PREVIEW_RENDERERS = [PreviewJSONRenderer if r is JSONRenderer else r for r in api_settings.DEFAULT_RENDERER_CLASSES]


class SnapshotHeadersMixin:
    """Every response to a caller who may read the snapshot says how fresh it is (a stranger's 401, a
    role-less token's 403 and an unknown cluster's answer say nothing of it: a known cluster's refresh
    time would tell the name is a managed cluster); unknown query parameters are a 400."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if hasattr(self, (request.method or "").lower()):  # an undeclared method is a 405 whatever the query
            check_query_parameters(request, self.accepted_query_parameters())

    def accepted_query_parameters(self) -> set[str]:
        """The filters and the pagination of a list; ``confirm`` and ``gitopsOverride`` of an unoffload;
        nothing else anywhere."""
        if getattr(self, "action", None) == "unoffload":
            return {"confirm", "gitopsOverride"}
        if getattr(self, "action", None) == "files":
            return {"format"}
        if getattr(self, "action", None) != "list":
            return set()
        accepted: set[str] = set()
        filterset = getattr(self, "filterset_class", None)
        if filterset is not None and getattr(self, "filter_backends", None):
            accepted |= set(filterset.base_filters)
        paginator = getattr(self, "paginator", None)
        if paginator is not None:
            accepted |= {paginator.limit_query_param, paginator.offset_query_param}
        return accepted

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        # DRF's Request holds ``_user`` once authentication ran (reading ``user`` would run it again, and
        # raise, in the answer to a request whose credentials it refused).
        if unknown_cluster(request) or roles.role_of(getattr(request, "_user", None)) is None:
            return response
        state = SnapshotState.get(current_managed(request))
        response["X-Snapshot-Stale"] = "true" if state.is_stale() else "false"
        if state.last_success_at:
            response["X-Snapshot-Refreshed-At"] = state.last_success_at.isoformat()
        return response


class ObjectNotFound(NotFound):
    """A 404 that names what was not found, as the Kubernetes API server does: the message
    ``namespaces "shopx" not found`` and ``details.name`` / ``details.kind`` in the Status."""

    def __init__(self, kind: str, name: Any) -> None:
        self.kind = kind
        self.name = str(name)[:253]
        super().__init__(f'{kind} "{self.name}" not found')


class NamedNotFoundMixin:
    """``get_object`` of a viewset whose 404 names the object (``kind``: the resource, plural)."""

    not_found_kind = ""

    def get_object(self) -> Any:
        lookup = self.lookup_url_kwarg or self.lookup_field  # type: ignore[attr-defined]
        value = self.kwargs.get(lookup, "")  # type: ignore[attr-defined]
        if lookup == "pk" and not (value.isascii() and value.isdigit() and 0 < int(value) < 2**63):
            raise ObjectNotFound(self.not_found_kind, value)  # not an id a row can have (past int64: a 500)
        try:
            return super().get_object()  # type: ignore[misc]
        except Http404 as exc:
            raise ObjectNotFound(self.not_found_kind, value) from exc


def namespace_or_404(name: str, managed: ManagedRef = None) -> Namespace:
    """The namespace ``name`` of ``managed`` (None: the default cluster), or the named 404."""
    try:
        return Namespace.objects.of(managed).get(name=name)
    except Namespace.DoesNotExist:
        raise ObjectNotFound("namespaces", name) from None


def _confirm_query(request: Request, name: str = "confirm") -> bool:
    """``?confirm=true`` (or 1) confirms a destructive DELETE (``?gitopsOverride=true`` overrides GitOps);
    false, 0 or none does not; anything else is a 400."""
    value = request.query_params.get(name)
    if value is None or value.lower() in ("false", "0"):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise ValidationError({name: ["must be true or false"]})


def _expected_generation(request: Request, body: dict[str, Any]) -> int | None:
    """The generation the client based its change on: ``If-Match: "<generation>"`` or the body."""
    header = if_match_generation(request)
    return header if header is not None else body.get("expectedGeneration")


class SnapshotView(SnapshotHeadersMixin, APIView):
    @extend_schema(responses=SnapshotSerializer)
    def get(self, request: Request) -> Response:
        return Response(SnapshotSerializer(SnapshotState.get(current_managed(request))).data)


class ClusterViewSet(NamedNotFoundMixin, SnapshotHeadersMixin, viewsets.ReadOnlyModelViewSet):
    not_found_kind = "clusters"
    queryset = Cluster.objects.all()  # get_queryset keeps the request's managed cluster
    serializer_class = ClusterSerializer
    lookup_field = "cluster_id"
    lookup_url_kwarg = "clusterId"
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        return Cluster.objects.of(current_managed(self.request))

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        managed = current_managed(self.request)
        nodes: dict[str, list[VirtualNode]] = {}
        for vn in VirtualNode.objects.of(managed):
            nodes.setdefault(vn.cluster_id, []).append(vn)
        context["virtual_nodes"] = nodes
        context["hosted"] = dict(
            ClusterOffloading.objects.of(managed)
            .filter(selected=True)
            .order_by()
            .values("cluster_id")
            .annotate(n=Count("id"))
            .values_list("cluster_id", "n")
        )
        return context


class NamespaceViewSet(NamedNotFoundMixin, SnapshotHeadersMixin, viewsets.ReadOnlyModelViewSet):
    """Namespaces and their offloading. PUT/DELETE ``offloading`` queue a change (202)."""

    not_found_kind = "namespaces"

    queryset = Namespace.objects.prefetch_related("cluster_states")  # get_queryset: one managed cluster's
    serializer_class = NamespaceSerializer
    filterset_class = NamespaceFilterSet
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    def get_queryset(self) -> Any:
        return Namespace.objects.of(current_managed(self.request)).prefetch_related("cluster_states")

    @extend_schema(responses=NamespaceDetailSerializer)
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        namespace = self.get_object()
        response = Response(NamespaceDetailSerializer(namespace, context=self.get_serializer_context()).data)
        response["ETag"] = f'"{namespace.offloading_generation}"'
        return response

    @extend_schema(request=OffloadSerializer, responses={202: ChangeRequestSerializer})
    @action(detail=True, methods=["put"], url_path="offloading")
    def offload(self, request: Request, name: str) -> Response:
        namespace = namespace_or_404(name, current_managed(request))
        serializer = OffloadSerializer(data=request.data, context={"namespace": namespace})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        expected = _expected_generation(request, data)
        try:
            change = request_offload(
                name,
                data["spec"],
                current_actor(),
                expected_generation=expected,
                label_namespace=data["labelNamespace"],
                confirmed=data["confirm"],
                gitops_override=data["gitopsOverride"],
                managed=namespace.managed_id,
            )
        except ChangeRejected as exc:
            return refusal_response(exc, name=name)
        return Response(ChangeRequestSerializer(change).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={202: ChangeRequestSerializer},
        parameters=[
            OpenApiParameter(
                "confirm",
                bool,
                description="Unoffloading deletes the twin namespace on every peer: without `confirm=true` it is a "
                "400 `Status` on `confirm`, with what it deletes.",
            ),
            OpenApiParameter("gitopsOverride", bool, description=GITOPS_OVERRIDE_HELP),
        ],
    )
    @offload.mapping.delete
    def unoffload(self, request: Request, name: str) -> Response:
        managed = current_managed(request)
        namespace_or_404(name, managed)  # a 404 for an unknown namespace, before any rule
        expected = _expected_generation(request, {})
        confirmed = _confirm_query(request)
        override = _confirm_query(request, "gitopsOverride")
        try:
            change = request_unoffload(
                name,
                current_actor(),
                expected_generation=expected,
                confirmed=confirmed,
                gitops_override=override,
                managed=managed,
            )
        except ChangeRejected as exc:
            return refusal_response(exc, name=name)
        return Response(ChangeRequestSerializer(change).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=OffloadSerializer, responses=NamespacePreviewSerializer)
    @action(detail=True, methods=["post"], renderer_classes=PREVIEW_RENDERERS)
    def preview(self, request: Request, name: str) -> Response:
        """What the spec would do, computed from the snapshot; invalid input is part of the answer."""
        namespace = namespace_or_404(name, current_managed(request))
        serializer = OffloadSerializer(data=request.data, context={"namespace": namespace})
        if not serializer.is_valid():
            return Response({"valid": False, "errors": serializer.errors})
        data = serializer.validated_data
        pod = data.get("pod")
        if pod is not None and not isinstance(pod.get("spec", {}), dict):
            return Response({"valid": False, "errors": {"pod": ["spec must be an object"]}})
        checked = validate(namespace, data["spec"])
        if checked.errors:
            return Response({"valid": False, "errors": checked.errors, "warnings": checked.warnings})
        destructive = is_destructive(namespace, ChangeAction.UPDATE, checked.spec)
        # A new offloading's remote name is also checked on the selected managed providers, asked as the
        # requesting user as each provider sees them (its impersonation and groups).
        asker = request.user
        identity = (
            identity_per_cluster(asker.get_username()) if asker.is_authenticated and not namespace.offloaded else None
        )
        try:
            result = preview(namespace, checked.spec, pod or None, providers=True, identity=identity)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            # The sample pod is free-form input: a shape mutate_pod cannot read is the caller's error.
            return Response({"valid": False, "errors": {"pod": [f"not a pod Liqo's webhook could mutate: {exc}"]}})
        shown: dict[int, list[dict[str, Any]]] = {}  # id of a shared explanation -> its terms, shown once
        clusters = [
            {
                "clusterId": row["cluster_id"],
                "selected": row["selected"],
                "note": row["note"],
                "error": row["error"],
                "virtualNodesDisagree": row["disagree"],
                "explanations": [_explanation(vn, why, shown) for vn, why in row["explanations"]],
            }
            for row in result.clusters
        ]
        first = next((why for row in result.clusters for _vn, why in row["explanations"]), None)
        return Response(
            {
                "valid": True,
                "errors": {},
                "warnings": checked.warnings,
                "spec": checked.spec,
                "clusters": clusters,
                "terms": [t["text"] for t in first["terms"]] if first else [],
                "selected": result.selected,
                "gains": result.gains,
                "losses": result.losses,
                "remoteNamespaceName": result.remote_namespace_name,
                "refusingClusters": [
                    {"clusterId": cid, "reasons": list(reasons)} for cid, reasons in result.refusing.items()
                ],
                "remoteNameCollisions": [
                    {"namespace": c.other, "clusters": list(c.clusters), "message": c.message()}
                    for c in result.collisions
                ],
                "remoteNamespaceChecks": [
                    {
                        "clusterId": r.cluster_id,
                        "managedCluster": r.cluster,
                        "remoteNamespaceName": r.remote_name,
                        "verdict": r.verdict,
                        "fails": r.fails,
                        "message": r.message(),
                    }
                    for r in result.remote_checks
                ],
                "manifest": result.manifest,
                "pod": result.pod_after,
                "runtimeClassWarnings": result.runtime_notes,
                "podImpact": result.pod_impact.as_api(),
                "capacity": [room.as_api() for room in result.rooms.values()],
                "nearlyFull": result.nearly_full,
                "destructive": destructive,
            }
        )


def _explanation(vn: str, why: dict[str, Any], shown: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """One virtual node's verdict; its terms by index into the preview's ``terms`` (their text is the
    same for every virtual node, so it is written once). Nodes alike for the selector share ``why``
    (``select_clusters``): they share one list of terms too, built once (``shown``, by ``id(why)``), which
    ``PreviewJSONRenderer`` also writes once."""
    terms = shown.get(id(why))
    if terms is None:
        terms = shown[id(why)] = [{k: v for k, v in t.items() if k != "text"} for t in why["terms"]]
    return {"virtualNode": vn, **{camel(k): v for k, v in why.items()}, "terms": terms}
