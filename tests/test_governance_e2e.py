"""Four-eyes approval end to end (issue 29): an unoffload asked for through the REST API waits for a second
person, is approved by another operator, and only then does the real worker (real Redis, Celery worker
and beat processes) delete the NamespaceOffloading in the sandbox."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from access import roles
from access.models import Scope
from offloading.audit.trail import verify
from offloading.choices import AuditAction, ChangeState
from offloading.models import Approval, ApprovalDecision, AuditEvent, ChangeRequest, Namespace
from tests.fixtures.waits import wait_until
from tests.test_e2e import _free_namespace, _get_offloading

pytestmark = pytest.mark.e2e


def _operator(django_user_model: Any, name: str) -> APIClient:
    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    user.groups.add(Group.objects.get_or_create(name=roles.OPERATOR)[0])
    Scope.objects.create(user=user, kind="glob", value="*")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_an_unoffload_waits_for_a_second_person_then_the_worker_applies_it(
    pipeline: Any, k8s: Any, django_user_model: Any, settings: Any
) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "APPROVAL_POLICY": "destructive"}
    olga, oscar = _operator(django_user_model, "olga"), _operator(django_user_model, "oscar")
    pipeline.start_worker()
    pipeline.start_beat()
    wait_until(lambda: Namespace.objects.exists(), 60, message="the first refresh by beat + worker")
    name = _free_namespace().name

    # A new offloading destroys nothing: it goes straight to the worker.
    offload = olga.put(
        f"/api/v1/namespaces/{name}/offloading/", {"podOffloadingStrategy": "LocalAndRemote"}, format="json"
    )
    assert offload.status_code == 202, offload.json()
    wait_until(
        lambda: ChangeRequest.objects.get(pk=offload.json()["id"]).state == ChangeState.APPLIED,
        60,
        message="the offload",
    )
    assert _get_offloading(k8s, name) is not None
    wait_until(lambda: Namespace.objects.get(name=name).offloaded, 60, message="the snapshot to see the offloading")

    # The unoffload is destructive: it awaits approval and the worker never sees it.
    asked = olga.delete(f"/api/v1/namespaces/{name}/offloading/?confirm=true")
    assert asked.status_code == 202, asked.json()
    assert asked.json()["state"] == ChangeState.AWAITING_APPROVAL
    change_id = asked.json()["id"]
    assert asked.json()["governance"]["approval"]["decision"] == ApprovalDecision.PENDING

    # The requester may not approve it herself.
    own = olga.post(f"/api/v1/changes/{change_id}/approve/", {"comment": "mine"}, format="json")
    assert own.status_code == 403 and own.json()["kind"] == "Status"
    # A sweep runs every second in this pipeline: it must not pick the waiting change up.
    sweeps = pipeline.log("beat").count("offloading.tasks.sweep")
    wait_until(lambda: pipeline.log("beat").count("offloading.tasks.sweep") >= sweeps + 2, 60, message="two sweeps")
    assert ChangeRequest.objects.get(pk=change_id).state == ChangeState.AWAITING_APPROVAL
    assert _get_offloading(k8s, name) is not None
    assert [a["change"] for a in oscar.get("/api/v1/approvals/").json()] == [change_id]

    # A second operator approves: the change is queued and the worker deletes the offloading.
    approved = oscar.post(f"/api/v1/changes/{change_id}/approve/", {"comment": "maintenance window"}, format="json")
    assert approved.status_code == 200, approved.json()
    wait_until(lambda: ChangeRequest.objects.get(pk=change_id).is_terminal, 90, message="the approved unoffload")
    change = ChangeRequest.objects.get(pk=change_id)
    assert change.state == ChangeState.APPLIED, change.message
    assert _get_offloading(k8s, name) is None

    approval = Approval.objects.get(change=change)
    assert approval.decision == ApprovalDecision.APPROVED and approval.decided_by_name == "oscar"
    actions = list(AuditEvent.objects.filter(change=change).order_by("id").values_list("action", "user_name"))
    assert actions == [
        (AuditAction.REQUESTED, "olga"),
        (AuditAction.APPROVAL_REQUESTED, "olga"),
        (AuditAction.APPROVED, "oscar"),
        (AuditAction.APPLIED, "olga"),
    ]
    assert verify().ok
