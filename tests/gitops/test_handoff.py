"""The GitOps hand-off end to end, against real Git servers on loopback (`git daemon`, and `git
http-backend` behind HTTP basic): POST /api/v1/changes/{id}/handoff/ and /api/v1/bulk/{id}/handoff/
land a commit on a new branch; a clone of the repository afterwards shows its history (author, message
naming the requester and the change ids, the files as /files/ gives them); the handed_off audit row
holds the repository (no credentials), branch, sha and path, and the sealed trail verifies; Git's
failures are clear Status bodies; a viewer and an operator out of scope may not hand off."""

from __future__ import annotations

import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from rest_framework.test import APIClient

from access.models import Scope
from offloading.audit.trail import verify
from offloading.choices import AuditAction, ChangeAction
from offloading.gitops.detect import facts
from offloading.models import Approval, ApprovalDecision, AuditEvent, BulkRequest, ChangeRequest, Namespace
from tests.fixtures.waits import free_port
from tests.gitops.conftest import HTTP_PASSWORD, HTTP_USER
from tests.gitops.gitserver import GitDaemon, GitHttpServer, git
from tests.gitops.test_override import WHO, _flux

pytestmark = pytest.mark.django_db

GAINS = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west", "eu-south"]}
            ]
        }
    ]
}
PATH = "clusters/prod/liqo"
SPEC = {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": GAINS}


def configure(settings: Any, url: str, **extra: str) -> None:
    settings.LIQO_DASH_GITOPS = {"REPO_URL": url, "BRANCH": "main", "PATH": PATH, "TIMEOUT": "20", **extra}


def _edit(api: Any) -> ChangeRequest:
    response = api.put("/api/v1/namespaces/shop/offloading/", {"clusterSelector": GAINS}, format="json")
    assert response.status_code == 202, response.content
    return ChangeRequest.objects.get(pk=response.json()["id"])


def _clone(source: str, into: Path) -> Path:
    git("clone", "--quiet", "--no-checkout", source, str(into))
    return into


def _handed_off() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AuditAction.HANDED_OFF).order_by("seq"))


def test_a_change_lands_on_a_new_branch(api: Any, fleet: Any, daemon: GitDaemon, settings: Any, tmp_path: Path) -> None:
    configure(settings, daemon.url())
    change = _edit(api)
    response = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    branch = f"liqo-dash/change-{change.pk}"
    directory = f"{PATH}/change-{change.pk}"
    assert (body["branch"], body["repository"], body["path"], body["baseBranch"]) == (
        branch,
        daemon.url(),
        directory,
        "main",
    )
    assert body["changeIds"] == [change.pk] and "bulk" not in body
    expected = {
        f"{directory}/{p}": text for p, text in api.get(f"/api/v1/changes/{change.pk}/files/").json()["files"].items()
    }
    assert body["files"] == sorted(expected)

    clone = _clone(daemon.url(), tmp_path / "clone")
    git("fetch", "--quiet", "origin", branch, cwd=clone)
    log = git("log", "--format=%H %P|%an|%cn|%s", f"origin/{branch}", cwd=clone).splitlines()
    assert len(log) == 3  # the seed's two commits and the hand-off
    head, parents = log[0].split("|")[0].split(" ")
    assert head == body["sha"] and parents == body["baseSha"] == log[1].split("|")[0].split(" ")[0]
    assert log[0].split("|")[1:] == ["admin", "liqo-dash", f"liqo-dash: change #{change.pk} requested by admin"]
    message = git("log", "-1", "--format=%B", body["sha"], cwd=clone)
    assert f"#{change.pk} update shop" in message and "Approvals: none" in message
    assert f"Requested-by: admin\nLiqo-Dash-Change: {change.pk}" in message
    assert git("log", "-1", "--format=%ae", body["sha"], cwd=clone).strip() == "admin@example.com"
    for path, text in expected.items():
        assert git("show", f"{body['sha']}:{path}", cwd=clone) == text
    # main did not move
    assert git("rev-parse", "origin/main", cwd=clone).strip() == body["baseSha"]

    (event,) = _handed_off()
    assert event.change == change and event.namespace == "shop" and event.user_name == "admin"
    assert event.outcome == "committed" and event.seq == body["auditSeq"]
    after = event.after
    assert isinstance(after, dict) and after["sha"] == body["sha"] and after["branch"] == branch
    assert after["repository"] == daemon.url() and after["path"] == directory
    assert body["sha"][:12] in event.message and branch in event.message
    verdict = verify()
    assert verdict.ok and verdict.head_seq == event.seq, verdict.describe()

    # The same change again: its branch is there; a clear 409, nothing recorded.
    again = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert again.status_code == 409, again.content
    status = again.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "AlreadyExists", 409)
    assert status["details"]["causes"][0]["reason"] == "BranchExists" and branch in status["message"]
    assert len(_handed_off()) == 1


def test_a_bulk_over_http_basic(
    api: Any, fleet: Any, http_server: GitHttpServer, settings: Any, tmp_path: Path
) -> None:
    secret = tmp_path / "password"
    secret.write_text(HTTP_PASSWORD + "\n")
    # A user name in the URL is allowed; it must not be shown anywhere.
    url = http_server.url().replace("http://", f"http://{HTTP_USER}@")
    configure(settings, url, USERNAME=HTTP_USER, PASSWORD_FILE=str(secret))
    Namespace.objects.filter(name__in=["shop", "payments"]).update(labels={"env": "prod"})
    created = api.post(
        "/api/v1/bulk/",
        {"action": "offload", "namespaceSelector": "env=prod", "spec": SPEC, "confirm": True},
        format="json",
    )
    assert created.status_code == 201, created.content
    bulk = BulkRequest.objects.get()
    ids = sorted(bulk.changes.values_list("pk", flat=True))
    assert len(ids) == 2

    response = api.post(f"/api/v1/bulk/{bulk.pk}/handoff/", format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    overlay = "changes-" + "-".join(str(i) for i in ids)
    assert body["branch"] == f"liqo-dash/{overlay}" and body["bulk"] == bulk.pk and body["changeIds"] == ids
    assert body["repository"] == http_server.url()  # no user, no password
    assert HTTP_PASSWORD not in response.content.decode()

    clone = _clone(str(Path(http_server.root) / "fleet.git"), tmp_path / "clone")
    message = git("log", "-1", "--format=%an|%B", body["sha"], cwd=clone)
    assert message.startswith(f"admin|liqo-dash: changes #{ids[0]}, #{ids[1]} requested by admin\n")
    assert f"#{ids[0]} " in message and "offload payments" in message and "update shop" in message
    assert all(f"Liqo-Dash-Change: {i}" in message for i in ids)
    files = api.get(f"/api/v1/bulk/{bulk.pk}/files/").json()["files"]
    for rel, text in files.items():
        assert git("show", f"{body['sha']}:{PATH}/{overlay}/{rel}", cwd=clone) == text
    listed = git("ls-tree", "-r", "--name-only", body["sha"], "--", PATH, cwd=clone).split()
    assert listed == sorted(f"{PATH}/{overlay}/{rel}" for rel in files) == body["files"]

    (event,) = _handed_off()
    after = event.after
    assert isinstance(after, dict) and event.change is None and event.namespace == "" and after["bulk"] == bulk.pk
    assert after["repository"] == http_server.url() and HTTP_USER not in after["repository"]
    assert HTTP_PASSWORD not in str(event.after) + event.message
    assert verify().ok


def test_refused_credentials_are_a_clear_status(
    api: Any, fleet: Any, http_server: GitHttpServer, settings: Any, tmp_path: Path
) -> None:
    wrong = tmp_path / "password"
    wrong.write_text("not-the-password")
    configure(settings, http_server.url(), USERNAME=HTTP_USER, PASSWORD_FILE=str(wrong))
    change = _edit(api)
    response = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert response.status_code == 409, response.content
    status = response.json()
    assert (status["kind"], status["reason"]) == ("Status", "Conflict")
    cause = status["details"]["causes"][0]
    assert cause["reason"] == "AuthRefused" and cause["field"] == "LIQO_DASH_GITOPS_PASSWORD_FILE"
    assert "refused the credentials" in status["message"] and "not-the-password" not in response.content.decode()
    assert _handed_off() == []


def test_an_unreachable_server_is_a_503_status(api: Any, fleet: Any, settings: Any) -> None:
    configure(settings, f"git://127.0.0.1:{free_port()}/fleet.git")  # nobody listens there
    change = _edit(api)
    response = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert response.status_code == 503, response.content
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "ServiceUnavailable", 503)
    assert status["details"]["causes"][0]["reason"] == "Unreachable" and "cannot be reached" in status["message"]
    assert _handed_off() == []


def test_no_repository_configured_names_the_setting(api: Any, fleet: Any, settings: Any) -> None:
    settings.LIQO_DASH_GITOPS = {"REPO_URL": "", "BRANCH": "main", "PATH": "liqo-dash"}
    change = _edit(api)
    response = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert response.status_code == 409, response.content
    status = response.json()
    assert status["details"]["causes"][0]["field"] == "LIQO_DASH_GITOPS_REPO_URL"
    assert "LIQO_DASH_GITOPS_REPO_URL" in status["message"]
    assert api.post("/api/v1/changes/999999/handoff/", format="json").status_code == 404
    assert api.post("/api/v1/bulk/999999/handoff/", format="json").json()["details"]["kind"] == "bulkrequests"


def _user(django_user_model: Any, name: str, role: str, globs: tuple[str, ...] = ()) -> APIClient:
    user = django_user_model.objects.create_user(name, password=f"{name}-password-1234", email=f"{name}@example.com")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    for value in globs:
        Scope.objects.create(user=user, kind="glob", value=value)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_viewer_and_an_operator_out_of_scope_may_not_hand_off(
    api: Any, fleet: Any, daemon: GitDaemon, settings: Any, django_user_model: Any
) -> None:
    configure(settings, daemon.url())
    change = _edit(api)
    before = git("for-each-ref", "refs/heads", cwd=Path(daemon.root) / "fleet.git")
    viewer = _user(django_user_model, "vera", "viewer")
    refused = viewer.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert refused.status_code == 403 and refused.json()["kind"] == "Status" and "viewer" in refused.json()["message"]

    outsider = _user(django_user_model, "otto", "operator", globs=("team-*",))
    refused = outsider.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert refused.status_code == 403, refused.content
    assert "out of scope" in refused.json()["message"]
    assert AuditEvent.objects.filter(action=AuditAction.REFUSED, user_name="otto", namespace="shop").exists()
    assert git("for-each-ref", "refs/heads", cwd=Path(daemon.root) / "fleet.git") == before
    assert _handed_off() == []

    # An operator whose scopes cover shop may, and the commit says who handed it off for the requester.
    insider = _user(django_user_model, "olga", "operator", globs=("shop",))
    response = insider.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert response.status_code == 201, response.content
    message = git("log", "-1", "--format=%an|%B", response.json()["sha"], cwd=Path(daemon.root) / "fleet.git")
    assert message.startswith("admin|") and "Handed off to Git by olga" in message
    assert _handed_off()[0].user_name == "olga"


def test_the_schema_shows_the_hand_off(api: Any) -> None:
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path in ("/api/v1/changes/{id}/handoff/", "/api/v1/bulk/{id}/handoff/"):
        operation = schema["paths"][path]["post"]
        assert set(operation["responses"]) >= {"201", "403", "404", "409", "503"}, operation["responses"].keys()
        ref = operation["responses"]["201"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/Commit")
    assert {"sha", "branch", "repository", "files"} <= set(schema["components"]["schemas"]["Commit"]["properties"])


def test_a_change_of_a_namespace_managed_from_git_says_who_manages_it(
    api: Any, admin_client: Any, fleet: Any, daemon: GitDaemon, settings: Any
) -> None:
    """The way to go for an offloading Flux manages: a change that Flux undid (here in conflict) is handed
    off; the answer, the audit row and the page say who manages the namespace."""
    configure(settings, daemon.url())
    Namespace.objects.filter(name="shop").update(gitops_facts=facts(_flux()))
    base = dict(Namespace.objects.get(name="shop").offloading_spec or {})
    change = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        base_spec=base,
        desired_spec={**base, "clusterSelector": GAINS},
        state="conflict",
        requester_name="admin",
        source="api",
    )
    page = admin_client.get(f"/changes/{change.pk}/handoff/").content.decode()
    assert 'id="handoff-managed"' in page and WHO in page
    response = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert response.status_code == 201, response.content
    assert response.json()["managedBy"] == {"shop": WHO}
    (event,) = _handed_off()
    assert isinstance(event.after, dict) and event.after["managedBy"] == {"shop": WHO}
    assert verify().ok


def test_a_server_that_never_answers_is_cut_off_by_the_timeout(api: Any, fleet: Any, settings: Any) -> None:
    """A Git server that takes the connection and says nothing: the hand-off ends after the configured
    timeout with the 503 Status, instead of holding the request."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel accepts the connections; nobody ever answers
    try:
        configure(settings, f"git://127.0.0.1:{silent.getsockname()[1]}/fleet.git", TIMEOUT="2")
        change = _edit(api)
        response = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    finally:
        silent.close()
    assert response.status_code == 503, response.content
    status = response.json()
    assert (
        status["details"]["causes"][0]["reason"] == "Unreachable" and "did not answer within 2 s" in status["message"]
    )
    assert _handed_off() == []


def test_the_commit_names_who_approved_the_change(
    api: Any, fleet: Any, daemon: GitDaemon, settings: Any, tmp_path: Path
) -> None:
    """The governance flow's decision (here written as an approval of the change by olga) is in the
    commit message the pages and the API hand off."""
    configure(settings, daemon.url())
    change = _edit(api)
    now = timezone.now()
    Approval.objects.create(
        change=change,
        requester_name="admin",
        expires_at=now + timedelta(hours=1),
        spec_hash="x",
        decision=ApprovalDecision.APPROVED,
        decided_by_name="olga",
        decided_at=now,
        comment="window agreed with the payments team",
    )
    response = api.post(f"/api/v1/changes/{change.pk}/handoff/", format="json")
    assert response.status_code == 201, response.content
    clone = _clone(daemon.url(), tmp_path / "clone")
    git("fetch", "--quiet", "origin", response.json()["branch"], cwd=clone)
    message = git("log", "-1", "--format=%B", response.json()["sha"], cwd=clone)
    assert "Approvals: none" not in message
    assert "- olga at " in message and '"window agreed with the payments team"' in message
    assert "Approved-by: olga" in message
