"""REST API of change governance (issue 29): approve, reject, cancel and break glass on a change or a
whole bulk, and the approval requests that await the caller. The rules are ``offloading.governance``'s;
a refusal is a Kubernetes-style ``Status`` (403: the requester, a viewer or someone out of scope; 409: a
request already decided, expired or cancelled, or one whose namespace changed meanwhile and now awaits
a new decision; 400: a rejection without comment, a break glass without reason).

Per managed cluster (issue 28): under ``/api/v1/m/<name>/`` a step and the list are that cluster's (the
default's on the plain paths), as ``changes/`` and ``bulk/`` are: a change or bulk of another cluster is
a 404 there; the decider's scopes are judged in the change's cluster."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from liqo_dash.statusbody import status_data
from offloading.api.governance_serializers import AwaitingApprovalSerializer
from offloading.api.serializers import BulkRequestSerializer, ChangeRequestSerializer
from offloading.context import current_actor
from offloading.governance import approvals
from offloading.models import BulkRequest, ChangeRequest
from offloading.models.fleet import current_managed

COMMENT_MAX = 2000


class CommentSerializer(serializers.Serializer):
    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=COMMENT_MAX, help_text="Required to reject."
    )


class BreakGlassSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=COMMENT_MAX, help_text="Why this change cannot wait (mandatory).")


class StatusSerializer(serializers.Serializer):
    """A Kubernetes ``Status`` (the shape of every error of the API)."""

    kind = serializers.CharField()
    apiVersion = serializers.CharField()  # noqa: N815 - Kubernetes' name
    status = serializers.CharField()
    message = serializers.CharField()
    reason = serializers.CharField()
    code = serializers.IntegerField()
    details = serializers.DictField()


ERRORS = {
    400: OpenApiResponse(StatusSerializer, description="No comment to a rejection, no reason to a break glass."),
    403: OpenApiResponse(
        StatusSerializer,
        description="The requester deciding on their own change, a viewer, someone out of scope; break glass: not "
        "an admin.",
    ),
    404: OpenApiResponse(StatusSerializer, description="No such change or bulk."),
    409: OpenApiResponse(
        StatusSerializer,
        description="Already decided, expired or cancelled; or the namespace changed since the request, which now "
        "awaits a new decision.",
    ),
}


def refused(exc: approvals.Refused, pk: int, kind: str) -> Response:
    causes = [{"field": exc.field, "reason": "FieldValueInvalid", "message": exc.message}]
    return Response(status_data(exc.code, exc.message, causes, name=str(pk), kind=kind), status=exc.code)


def _comment(request: Request) -> str:
    body = CommentSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return str(body.validated_data["comment"])


def _reason(request: Request) -> str:
    body = BreakGlassSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return str(body.validated_data["reason"])


def _change(pk: int) -> Response:
    change = ChangeRequest.objects.get(pk=pk)
    return Response(ChangeRequestSerializer(change).data, status=status.HTTP_200_OK)


def _bulk(pk: int) -> Response:
    bulk = BulkRequest.objects.with_progress().get(pk=pk)
    return Response(BulkRequestSerializer(bulk).data, status=status.HTTP_200_OK)


class _Step(APIView):
    """One governance step on a change (``bulk = False``) or a bulk."""

    bulk = False
    kind = "changerequests"

    def answer(self, pk: int) -> Response:
        return _bulk(pk) if self.bulk else _change(pk)

    def ids(self, request: Request, pk: int) -> dict[str, Any]:
        """The step's subject, in the request's managed cluster."""
        subject = {"bulk_id": pk} if self.bulk else {"change_id": pk}
        return {**subject, "managed": current_managed(request)}


class ApproveChange(_Step):
    @extend_schema(request=CommentSerializer, responses={200: ChangeRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Approve a change that awaits approval: it is queued, or scheduled when outside its window."""
        try:
            approvals.approve(current_actor(), comment=_comment(request), **self.ids(request, pk))
        except approvals.Refused as exc:
            return refused(exc, pk, self.kind)
        return self.answer(pk)


class RejectChange(_Step):
    @extend_schema(request=CommentSerializer, responses={200: ChangeRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Reject a change that awaits approval, with a comment (required): it ends rejected."""
        try:
            approvals.reject(current_actor(), comment=_comment(request), **self.ids(request, pk))
        except approvals.Refused as exc:
            return refused(exc, pk, self.kind)
        return self.answer(pk)


class CancelChange(_Step):
    @extend_schema(request=CommentSerializer, responses={200: ChangeRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Cancel a change that awaits approval or is scheduled (the requester, or anyone who may change the
        namespace)."""
        try:
            approvals.cancel(current_actor(), comment=_comment(request), **self.ids(request, pk))
        except approvals.Refused as exc:
            return refused(exc, pk, self.kind)
        return self.answer(pk)


class BreakGlassChange(_Step):
    @extend_schema(request=BreakGlassSerializer, responses={200: ChangeRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Admins only: apply a waiting change now, without approval and outside its window, with a reason
        (audited ``broke_glass`` and alerted)."""
        try:
            approvals.break_glass(current_actor(), reason=_reason(request), **self.ids(request, pk))
        except approvals.Refused as exc:
            return refused(exc, pk, self.kind)
        return self.answer(pk)


class _BulkStep:
    bulk = True
    kind = "bulkrequests"


class ApproveBulk(_BulkStep, ApproveChange):
    @extend_schema(request=CommentSerializer, responses={200: BulkRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Approve a whole bulk (one approval for all its namespaces; its impact is in the approval)."""
        return super().post(request, pk)


class RejectBulk(_BulkStep, RejectChange):
    @extend_schema(request=CommentSerializer, responses={200: BulkRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Reject a whole bulk, with a comment (required)."""
        return super().post(request, pk)


class CancelBulk(_BulkStep, CancelChange):
    @extend_schema(request=CommentSerializer, responses={200: BulkRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Cancel the waiting changes of a bulk."""
        return super().post(request, pk)


class BreakGlassBulk(_BulkStep, BreakGlassChange):
    @extend_schema(request=BreakGlassSerializer, responses={200: BulkRequestSerializer, **ERRORS})
    def post(self, request: Request, pk: int) -> Response:
        """Admins only: apply the waiting changes of a bulk now, with a reason."""
        return super().post(request, pk)


class AwaitingMe(APIView):
    @extend_schema(responses=AwaitingApprovalSerializer(many=True))
    def get(self, request: Request) -> Response:
        """The approval requests of the request's managed cluster the caller may decide on now (not their
        own; within their rights there), oldest first."""
        found = approvals.awaiting(request.user, current_managed(request))
        return Response(AwaitingApprovalSerializer(found, many=True).data)
