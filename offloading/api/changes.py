"""REST API views of the write path's records: changes (their files, re-apply) and bulks (a dry run with
its impact, the request, their files). Every write goes through ``offloading.changes`` (the outbox)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from offloading.api.docs import BulkPlanSerializer
from offloading.api.handoff import FILES_SCHEMA, FilesNegotiation, files_of_bulk, files_of_change, files_response
from offloading.api.serializers import (
    BulkCreateSerializer,
    BulkRequestSerializer,
    ChangeRequestSerializer,
    ReapplySerializer,
)
from offloading.api.status import refusal_response
from offloading.api.views import NamedNotFoundMixin, SnapshotHeadersMixin
from offloading.changes.bulk import bulk_destructive_reason, plan_bulk, request_bulk
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.requests import reapply
from offloading.context import current_actor
from offloading.filtersets import ChangeRequestFilterSet
from offloading.gitops.files import FilesError
from offloading.models import BulkRequest, ChangeRequest
from offloading.models.fleet import current_managed
from offloading.whatif.capacity import rooms
from offloading.whatif.impact import bulk_impact


class ChangeRequestViewSet(FilesNegotiation, NamedNotFoundMixin, SnapshotHeadersMixin, viewsets.ReadOnlyModelViewSet):
    not_found_kind = "changerequests"
    queryset = ChangeRequest.objects.select_related("schedule", "managed").prefetch_related(
        "approvals", "bulk__approvals"
    )
    serializer_class = ChangeRequestSerializer
    filterset_class = ChangeRequestFilterSet

    def get_queryset(self) -> Any:
        """The changes of the request's managed cluster (``/api/v1/m/<name>/``; the default's without it)."""
        return super().get_queryset().filter(managed_id=current_managed(self.request))

    @FILES_SCHEMA
    @action(detail=True, methods=["get"], filter_backends=[])
    def files(self, request: Request, pk: str) -> Any:
        """The change as the files a GitOps repository holds (offloading.gitops.files): JSON, or
        ``?format=zip`` / ``?format=tar.gz``."""
        change = self.get_object()
        try:
            files = files_of_change(change)
        except FilesError as exc:
            return refusal_response(ChangeRejected({"change": [str(exc)]}, Refusal.CONFLICT), kind="changerequests")
        return files_response(request, files)

    @extend_schema(request=ReapplySerializer, responses={202: ChangeRequestSerializer})
    @action(detail=True, methods=["post"])
    def reapply(self, request: Request, pk: str) -> Response:
        """Resolve a conflict: the same change again, based on the version the snapshot holds now, merged
        field by field; a field both sides changed needs ``{"resolve": {"<field>": "mine"|"theirs"}}``
        (without it: 409 naming the field), a destructive one ``"confirm": true`` (without it: 400)."""
        conflicted = self.get_object()  # DRF's lookup: a malformed id is a 404, not a 500
        body = ReapplySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        choices = {str(k): str(v) for k, v in body.validated_data.get("resolve", {}).items()}
        try:
            change = reapply(
                conflicted.pk,
                current_actor(),
                choices,
                confirmed=body.validated_data["confirm"],
                gitops_override=body.validated_data["gitopsOverride"],
            )
        except ChangeRejected as exc:
            return refusal_response(exc, name=conflicted.namespace)
        return Response(ChangeRequestSerializer(change).data, status=status.HTTP_202_ACCEPTED)


class BulkRequestViewSet(
    FilesNegotiation, NamedNotFoundMixin, SnapshotHeadersMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet
):
    not_found_kind = "bulkrequests"
    queryset = BulkRequest.objects.with_progress().with_refused().select_related("managed")
    serializer_class = BulkRequestSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        """The bulks of the request's managed cluster, as for changes."""
        return super().get_queryset().filter(managed_id=current_managed(self.request))

    @FILES_SCHEMA
    @action(detail=True, methods=["get"])
    def files(self, request: Request, pk: str) -> Any:
        """The bulk's changes (the latest per namespace) as one overlay, as for a change."""
        bulk = self.get_object()
        try:
            files = files_of_bulk(bulk)
        except FilesError as exc:
            return refusal_response(ChangeRejected({"bulk": [str(exc)]}, Refusal.CONFLICT), kind="bulkrequests")
        return files_response(request, files)

    @extend_schema(request=BulkCreateSerializer, responses={200: BulkPlanSerializer, 201: BulkRequestSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = BulkCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        spec = dict(data["spec"]) if "spec" in data else None
        asked = (data["action"], data["namespaceSelector"], spec, current_actor())
        options = {
            "label_namespace": data["labelNamespace"],
            "expected_generations": data.get("expectedGenerations"),
            "gitops_override": data["gitopsOverride"],
            "managed": current_managed(request),
        }
        try:
            if data["dryRun"]:
                plan = plan_bulk(*asked, ask_api_server=True, **options)
                return Response(
                    {"namespaces": plan.namespaces, "skipped": plan.skipped, **_bulk_impact(plan.changes)},
                    status=status.HTTP_200_OK,
                )
            bulk = request_bulk(*asked, confirmed=data["confirm"], **options)
        except ChangeRejected as exc:
            return refusal_response(exc, kind="bulkrequests")
        return Response(BulkRequestSerializer(bulk).data, status=status.HTTP_201_CREATED)


def _bulk_impact(changes: list[Any]) -> dict[str, Any]:
    """A bulk dry run's impact: remote namespaces deleted, running pods hit, and the room on the clusters
    the new spec selects (what the bulk page shows before the typed confirmation)."""
    impact = bulk_impact(changes)
    managed = changes[0].managed_id if changes else None  # the bulk's cluster
    room = rooms(impact.targets, managed=managed) if impact.targets else {}
    return {
        "impact": {
            "remoteNamespacesDeleted": impact.remote_deleted,
            "runningPodsOnLostClusters": impact.pods_on_lost_clusters,
            "podsOffStrategy": impact.pods_off_strategy,
            "perNamespace": [
                {
                    "namespace": row.namespace,
                    "action": row.action,
                    "gains": row.gains,
                    "losses": row.losses,
                    "podImpact": row.pods.as_api(),
                }
                for row in impact.rows
            ],
        },
        "capacity": [r.as_api() for r in room.values()],
        "nearlyFull": [r.cluster_id for r in room.values() if r.nearly_full],
        "destructive": bulk_destructive_reason(changes),
    }
