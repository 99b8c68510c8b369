"""The audit trail in the API: ``GET /api/v1/audit/`` (filtered, paginated) and, for admins,
``GET /api/v1/audit/export/?format=csv|json`` streaming every match. Every managed cluster's events, each
with its cluster's name (``managedCluster``); ``?cluster=<name>`` keeps one cluster's.

CSV cells that a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return) are prefixed with ``'`` so they open as text.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

from django.http import Http404, StreamingHttpResponse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from access.permissions import IsAdmin
from offloading.api.serializers import AuditEventSerializer
from offloading.api.views import NamedNotFoundMixin
from offloading.filtersets import AuditFilterSet
from offloading.models import AuditEvent, ManagedCluster
from offloading.models.fleet import current_managed
from offloading.switcher import cluster_name

COLUMNS = (
    "seq",
    "managedCluster",
    "time",
    "userName",
    "source",
    "action",
    "namespace",
    "change",
    "outcome",
    "message",
    "before",
    "after",
    "requestId",
    "hash",
)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> str:
    """A CSV cell that opens as text in a spreadsheet, never as a formula."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return "'" + text if text.startswith(FORMULA_START) else text


class _Line:
    """A file-like object for csv.writer that hands back each line instead of storing it."""

    def write(self, value: str) -> str:
        return value


def _cluster_names() -> dict[int, str]:
    """Every managed cluster's name by its key, read once per export (not once per row)."""
    return dict(ManagedCluster.objects.values_list("pk", "name"))


def _row(event: AuditEvent, clusters: dict[int, str]) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "managedCluster": clusters.get(event.managed_id, ""),
        "time": event.time.isoformat(),
        "userName": event.user_name,
        "source": event.source,
        "action": event.action,
        "namespace": event.namespace,
        "change": event.change_id,
        "outcome": event.outcome,
        "message": event.message,
        "before": event.before,
        "after": event.after,
        "requestId": event.request_id,
        "hash": event.hash,
    }


def csv_lines(events: Any) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(COLUMNS)
    clusters = _cluster_names()
    for event in events.iterator(chunk_size=2000):
        row = _row(event, clusters)
        yield writer.writerow([neutralise(row[c]) for c in COLUMNS])


def json_lines(events: Any) -> Iterator[str]:
    yield "["
    first = True
    clusters = _cluster_names()
    for event in events.iterator(chunk_size=2000):
        yield ("" if first else ",") + json.dumps(_row(event, clusters), sort_keys=True, default=str)
        first = False
    yield "]"


# The time range as the filters read it (ISO 8601; an empty value means no bound).
TIME_PARAMETERS = [
    OpenApiParameter("since", OpenApiTypes.STR, description="ISO 8601 time: events at or after it"),
    OpenApiParameter("until", OpenApiTypes.STR, description="ISO 8601 time: events before it"),
]


class CSVRenderer(BaseRenderer):
    """Lets ``?format=csv`` through DRF's content negotiation; the export writes the CSV itself."""

    media_type = "text/csv"
    format = "csv"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return b"" if data is None else json.dumps(data).encode()


class AuditEventViewSet(NamedNotFoundMixin, viewsets.ReadOnlyModelViewSet):
    not_found_kind = "auditevents"
    queryset = AuditEvent.objects.select_related("managed").order_by("-seq")
    serializer_class = AuditEventSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = AuditFilterSet

    def get_queryset(self) -> Any:
        """Every cluster's events (``?cluster=`` keeps one's), or one cluster's under ``/api/v1/m/<name>/``."""
        queryset = super().get_queryset()
        return queryset.filter(managed_id=current_managed(self.request)) if cluster_name(self.request) else queryset

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        """``?format=`` is the export's own parameter: an unknown value is a 400 (below), not DRF's 404."""
        try:
            return super().perform_content_negotiation(request, force)
        except (NotFound, Http404):
            return JSONRenderer(), JSONRenderer.media_type

    def handle_exception(self, exc: Exception) -> Any:
        """Errors are JSON, whatever format the export asked for."""
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)

    @extend_schema(parameters=TIME_PARAMETERS)
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        parameters=[
            *TIME_PARAMETERS,
            OpenApiParameter("cluster", OpenApiTypes.STR, description="A managed cluster's name: only its events"),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["csv", "json"], default="csv"),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/json"): {"type": "array", "items": {"type": "object"}},
        },
    )
    @action(
        detail=False,
        methods=["get"],
        url_path="export",
        permission_classes=[IsAdmin],
        pagination_class=None,
        renderer_classes=[JSONRenderer, CSVRenderer],
    )
    def export(self, request: Request) -> StreamingHttpResponse:
        """Every event matching the filters, streamed (admins only)."""
        events = self.filter_queryset(self.get_queryset()).order_by("seq").select_related(None)
        wanted = request.query_params.get("format", "csv")
        if wanted not in ("csv", "json"):
            raise ValidationError({"format": [f"format must be csv or json, not {wanted[:40]!r}"]})
        if wanted == "json":
            response = StreamingHttpResponse(json_lines(events), content_type="application/json")
            name = "audit.json"
        else:
            response = StreamingHttpResponse(csv_lines(events), content_type="text/csv; charset=utf-8")
            name = "audit.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
