"""The GitOps hand-off in the API: ``POST /api/v1/changes/{id}/handoff/`` and
``POST /api/v1/bulk/{id}/handoff/`` commit the change (or the bulk's changes) on a new branch of the
configured Git repository (``offloading.gitops.handoff``) and answer the commit (201).

Who may: whoever may change every namespace handed off (``offloading.changes.authorize.permit``, with
the action of each change; a bulk also needs the operator role, as creating one does); a refusal is the
usual 403 ``Status``, written to the audit trail. Git's failures are ``Status`` bodies too, never a 500:
no repository configured or a setting that is not valid (409, the cause names the setting), the
repository unreachable (503 ``ServiceUnavailable``), not found, credentials refused, base branch
missing, push refused or nothing to commit (409 ``Conflict``), the branch already there (409
``AlreadyExists``: the same changes were handed off already). ``details.causes[0].reason`` is the
failure's own name (``Unreachable``, ``AuthRefused`` ...).

Per managed cluster (issue 28): under ``/api/v1/m/<name>/`` the change or bulk is looked up in that cluster
(the default's on the plain paths; another cluster's is a 404, as ``changes/{id}/`` is), judged with its
cluster's scopes, and committed under that cluster's directory of the repository.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from offloading.api.status import refusal_response
from offloading.api.views import ObjectNotFound, SnapshotHeadersMixin
from offloading.changes import authorize
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.context import Actor, current_actor
from offloading.gitops import handoff, repo
from offloading.gitops.files import FilesError
from offloading.governance.decisions import handoff_approvals
from offloading.models import BulkRequest, ChangeRequest
from offloading.models.fleet import current_managed

# HTTP status and Kubernetes reason of each failure of the hand-off (the others: 409 Conflict).
FAILURE_STATUS: dict[type[repo.GitOpsError], tuple[int, str]] = {
    repo.Unreachable: (503, "ServiceUnavailable"),
    repo.BranchExists: (409, "AlreadyExists"),
}
# The field a failure is about: the settings for the configuration, the repository otherwise.
FAILURE_FIELD: dict[type[repo.GitOpsError], str] = {
    repo.NotConfigured: "LIQO_DASH_GITOPS_REPO_URL",
    repo.ConfigInvalid: "LIQO_DASH_GITOPS",
    repo.BaseBranchMissing: "LIQO_DASH_GITOPS_BRANCH",
    repo.AuthRefused: "LIQO_DASH_GITOPS_PASSWORD_FILE",
    repo.BranchExists: "branch",
}


def failure_status(error: repo.GitOpsError) -> tuple[int, str]:
    """The HTTP status and Kubernetes reason of a failed hand-off (a git failure of no known kind: 503)."""
    if type(error) is repo.GitOpsError:
        return 503, "ServiceUnavailable"
    return FAILURE_STATUS.get(type(error), (409, "Conflict"))


def failure_body(error: repo.GitOpsError, *, name: str, kind: str) -> tuple[dict[str, Any], int]:
    code, reason = failure_status(error)
    field = FAILURE_FIELD.get(type(error), "repository")
    message = f"Hand-off to Git failed: {error}"
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {
            "name": name,
            "kind": kind,
            "causes": [{"field": field, "reason": error.reason, "message": str(error)}],
        },
        "code": code,
    }
    return body, code


def permit(actor: Actor, prepared: handoff.HandOff) -> None:
    """Raise ``FORBIDDEN`` (audited) unless ``actor`` may change every namespace handed off, with the
    action of its change; a bulk also needs the operator role (the pages ask the same, in
    ``offloading.views.gitops``)."""
    if prepared.bulk is not None:
        authorize.permit_bulk(actor, prepared.bulk.namespace_selector, "hand off", field="bulk")
    for namespace, change in prepared.namespaces():
        authorize.permit(actor, namespace, authorize.cluster_action(change))


class CommitSerializer(serializers.Serializer):
    """Where the hand-off landed."""

    repository = serializers.CharField(help_text="The repository's URL, without credentials.")
    branch = serializers.CharField(help_text="The new branch: `liqo-dash/change-12`, `liqo-dash/changes-12-13` ...")
    sha = serializers.CharField(help_text="The commit's sha.")
    baseBranch = serializers.CharField(help_text="The branch it starts from (LIQO_DASH_GITOPS_BRANCH).")  # noqa: N815
    baseSha = serializers.CharField(help_text="The base branch's head, the commit's parent.")  # noqa: N815
    path = serializers.CharField(
        help_text="The overlay's directory in the repository: `<path>/<overlay>`, or `<path>/<cluster>/<overlay>` for "
        "another managed cluster than the default."
    )
    files = serializers.ListField(child=serializers.CharField(), help_text="The files committed (repository paths).")
    changeIds = serializers.ListField(child=serializers.IntegerField())  # noqa: N815
    bulk = serializers.IntegerField(required=False, help_text="The bulk request handed off, if it was one.")
    managedBy = serializers.DictField(  # noqa: N815
        child=serializers.CharField(),
        required=False,
        help_text="The namespaces handed off whose offloading Argo CD or Flux manages, with who (only when any).",
    )
    auditSeq = serializers.IntegerField(help_text="The sequence number of the `handed_off` audit event.")  # noqa: N815


def commit_body(commit: handoff.Commit) -> dict[str, Any]:
    return {**commit.details(), "auditSeq": commit.audit_seq}


_STATUS_REF = {"$ref": "#/components/schemas/Status"}
HANDOFF_SCHEMA = extend_schema(
    request=None,
    responses={
        201: CommitSerializer,
        409: OpenApiResponse(
            _STATUS_REF,
            description="Conflict: no Git repository is configured (the cause names LIQO_DASH_GITOPS_REPO_URL) or "
            "a setting is not valid; the repository does not exist, refuses the credentials or the push, lacks the "
            "base branch, or already holds these files; `AlreadyExists`: the branch is there already (these "
            "changes were handed off before). `details.causes[0].reason` names the failure.",
        ),
        503: OpenApiResponse(
            _STATUS_REF,
            description="ServiceUnavailable: the Git server cannot be reached (or did not answer in time).",
        ),
    },
)
HANDOFF_HELP = (
    "Commit the {what} as files (the NamespaceOffloading manifests and a kustomize overlay, as `files/` "
    "gives them; another managed cluster's under its own directory, `<path>/<cluster>/`) on a new branch "
    "`liqo-dash/<overlay>` of the configured Git repository, authored by the "
    "requester, with a message naming the requester, the change ids and the approvals; the commit is "
    "written to the audit trail (`handed_off`). Needs the right to change every namespace it holds."
)


class _HandOffView(SnapshotHeadersMixin, APIView):
    kind = ""

    def prepare(self, pk: int, managed: int) -> handoff.HandOff:
        """The hand-off of object ``pk`` of managed cluster ``managed``; raises ObjectNotFound, or
        ChangeRejected when it has no files."""
        raise NotImplementedError

    def hand_off(self, request: Request, pk: int) -> Response:
        actor = current_actor()
        try:
            prepared = self.prepare(pk, current_managed(request))
            permit(actor, prepared)
            commit = handoff.hand_off(prepared, actor, approvals=handoff_approvals(prepared.changes))
        except ChangeRejected as exc:
            return refusal_response(exc, name=str(pk), kind=self.kind)
        except repo.GitOpsError as error:
            body, code = failure_body(error, name=str(pk), kind=self.kind)
            return Response(body, status=code)
        return Response(commit_body(commit), status=status.HTTP_201_CREATED)


class ChangeHandOffView(_HandOffView):
    kind = "changerequests"
    queryset = ChangeRequest.objects.all()

    def prepare(self, pk: int, managed: int) -> handoff.HandOff:
        change = ChangeRequest.objects.of(managed).filter(pk=pk).first()
        if change is None:
            raise ObjectNotFound(self.kind, pk)
        try:
            return handoff.of_change(change)
        except FilesError as error:
            raise ChangeRejected({"change": [str(error)]}, Refusal.CONFLICT) from None

    @extend_schema(description=HANDOFF_HELP.format(what="change"))
    @HANDOFF_SCHEMA
    def post(self, request: Request, pk: int) -> Response:
        return self.hand_off(request, pk)


class BulkHandOffView(_HandOffView):
    kind = "bulkrequests"
    queryset = BulkRequest.objects.all()

    def prepare(self, pk: int, managed: int) -> handoff.HandOff:
        bulk = BulkRequest.objects.of(managed).filter(pk=pk).first()
        if bulk is None:
            raise ObjectNotFound(self.kind, pk)
        try:
            return handoff.of_bulk(bulk)
        except FilesError as error:
            raise ChangeRejected({"bulk": [str(error)]}, Refusal.CONFLICT) from None

    @extend_schema(
        description=HANDOFF_HELP.format(what="bulk request's changes (the latest per namespace, one overlay)"),
    )
    @HANDOFF_SCHEMA
    def post(self, request: Request, pk: int) -> Response:
        return self.hand_off(request, pk)
