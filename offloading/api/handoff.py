"""The GitOps hand-off in the API: a change (or a bulk's changes) as the files a GitOps repository holds
(``offloading.gitops.files``), listed as JSON or downloaded as a zip or tar.gz archive.

``?format=`` picks the answer here, not DRF's renderer negotiation (which would answer an error of an
archive request with the archive's content type): :class:`FilesNegotiation` keeps the JSON renderer for
the ``files`` action, and the archives are plain downloads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from offloading.gitops.files import ChangeFiles, FileChange, FilesError, change_files
from offloading.gitops.handoff import cluster_directory
from offloading.models import BulkRequest, ChangeRequest

FORMATS = {
    "zip": ("application/zip", "zip"),
    "tar.gz": ("application/gzip", "tar.gz"),
}
FORMAT_HELP = (
    "`zip` or `tar.gz`: the overlay as an archive (deterministic: the same changes always download as the "
    "same bytes); none: the files as JSON, path to content."
)


class FilesSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The overlay's directory: `change-12`, `changes-12-13-14` ...")
    changeIds = serializers.ListField(child=serializers.IntegerField())  # noqa: N815
    notes = serializers.ListField(
        child=serializers.CharField(), help_text="What the files cannot say: a namespace to label ..."
    )
    files = serializers.DictField(
        child=serializers.CharField(), help_text="Path in the overlay to the file's content (YAML)."
    )


FILES_SCHEMA = extend_schema(
    parameters=[OpenApiParameter("format", str, enum=list(FORMATS), description=FORMAT_HELP)],
    responses={
        200: OpenApiResponse(FilesSerializer, description="The files, or the archive with ?format=zip|tar.gz"),
        (200, "application/zip"): OpenApiTypes.BINARY,
        (200, "application/gzip"): OpenApiTypes.BINARY,
    },
)


class FilesNegotiation:
    """The ``files`` action always negotiates JSON: its ``?format=`` is read by :func:`files_response`."""

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        if getattr(self, "action", None) == "files":
            renderer = self.get_renderers()[0]  # type: ignore[attr-defined]
            return renderer, renderer.media_type
        return super().perform_content_negotiation(request, force)  # type: ignore[misc]


def _format(request: Request) -> str | None:
    value = request.query_params.get("format")
    if value is None or value == "json":
        return None
    if value not in FORMATS:
        raise ValidationError({"format": [f"must be one of: json, {', '.join(FORMATS)}"]})
    return value


def _latest_per_namespace(changes: Iterable[ChangeRequest]) -> list[ChangeRequest]:
    """One change per namespace (a bulk retried holds several): the latest, by id."""
    latest: dict[str, ChangeRequest] = {}
    for change in sorted(changes, key=lambda ch: ch.pk):
        latest[change.namespace] = change
    return list(latest.values())


def files_of_change(change: ChangeRequest) -> ChangeFiles:
    """The change's overlay, as a hand-off commits it (its cluster named when it is not the default)."""
    cluster = cluster_directory(change.managed_id)
    return change_files([FileChange.of(change)], requester=change.requester_name, cluster=cluster)


def files_of_bulk(bulk: BulkRequest) -> ChangeFiles:
    changes = _latest_per_namespace(bulk.changes.all())
    if not changes:
        raise FilesError(f"bulk request {bulk.pk} has no change to write")
    cluster = cluster_directory(bulk.managed_id)
    return change_files([FileChange.of(ch) for ch in changes], requester=bulk.requester_name, cluster=cluster)


def files_response(request: Request, files: ChangeFiles) -> HttpResponse | Response:
    wanted = _format(request)
    if wanted is None:
        return Response(
            {
                "name": files.name,
                "changeIds": list(files.change_ids),
                "notes": list(files.notes),
                "files": {path: data.decode() for path, data in files.files.items()},
            }
        )
    content_type, suffix = FORMATS[wanted]
    data = files.zip_bytes() if wanted == "zip" else files.tar_gz_bytes()
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{files.name}.{suffix}"'
    return response
