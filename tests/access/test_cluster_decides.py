"""The request contract and the worker with impersonation on, against a sandbox whose RBAC lets
operators change only alpha and beta (and write, but not label, delta), while the dashboard's scope
for the operator is ``*``: the cluster has the last word, up front and when the change is applied."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from access.models import ApiToken
from offloading.changes import bulkpush
from offloading.changes.apply import apply_change
from offloading.changes.bulk import request_bulk
from offloading.choices import AuditAction, ChangeAction, ChangeState
from offloading.cluster import kube
from offloading.context import Actor
from offloading.models import AuditEvent, BulkRequest, ChangeRequest
from offloading.snapshot.refresh import refresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga(rbac_sandbox: Any, make_user: Any, settings: Any) -> APIClient:
    """The operator olga (dashboard scope ``*``), signed in to the API with a token."""
    settings.KUBE_IMPERSONATE = True
    settings.LIQO_DASH = {**settings.LIQO_DASH, "DRY_RUN_ON_SUBMIT": True}
    refresh()
    user = make_user("olga", "operator", globs=["*"])
    _, token = ApiToken.issue(user, "test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.user = user  # type: ignore[attr-defined]
    return client


def test_a_change_the_cluster_denies_is_refused_up_front_with_its_reason(olga: APIClient) -> None:
    response = olga.put("/api/v1/namespaces/gamma/offloading/", {}, format="json")

    assert response.status_code == 403
    status = response.json()
    assert status["kind"] == "Status" and status["reason"] == "Forbidden"
    assert status["message"].startswith(
        'The cluster does not allow "liqo-dash:olga" to create namespaceoffloadings in "gamma"'
    )
    assert not ChangeRequest.objects.exists()
    refused = AuditEvent.objects.get(action=AuditAction.REFUSED)
    assert refused.user_name == "olga" and refused.namespace == "gamma" and "does not allow" in refused.message
    assert kube.get_offloading("gamma") is None


def test_labelling_the_namespace_is_asked_for_only_when_the_change_labels_it(olga: APIClient) -> None:
    """delta: the offloading may be written, the namespace may not be labelled."""
    labelled = olga.put("/api/v1/namespaces/delta/offloading/", {"labelNamespace": True}, format="json")
    assert labelled.status_code == 403
    assert labelled.json()["message"].startswith('The cluster does not allow "liqo-dash:olga" to patch namespaces:')
    assert not ChangeRequest.objects.exists()

    plain = olga.put("/api/v1/namespaces/delta/offloading/", {}, format="json")
    assert plain.status_code == 202, plain.content
    assert ChangeRequest.objects.get().namespace == "delta"


def test_the_worker_pushes_as_the_user_who_asked(olga: APIClient) -> None:
    """A change that reached the queue (say the RBAC changed after it was accepted) is applied as its
    requester: the API server refuses olga in gamma, although the dashboard itself may write there."""
    user = olga.user  # type: ignore[attr-defined]
    allowed = ChangeRequest.objects.create(
        namespace="alpha",
        action=ChangeAction.OFFLOAD,
        desired_spec={"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"},
        requester=user,
        requester_name="olga",
        source="api",
    )
    denied = ChangeRequest.objects.create(
        namespace="gamma",
        action=ChangeAction.OFFLOAD,
        desired_spec={"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"},
        requester=user,
        requester_name="olga",
        source="api",
    )

    assert apply_change(allowed.pk) == ChangeState.APPLIED
    assert apply_change(denied.pk) == ChangeState.FAILED

    denied.refresh_from_db()
    assert 'User "liqo-dash:olga" cannot create resource "namespaceoffloadings"' in denied.message
    assert kube.get_offloading("gamma") is None
    assert kube.get_offloading("alpha") is not None


def _olga_bulk(olga: APIClient) -> BulkRequest:
    """olga offloads alpha (allowed) and gamma (the cluster refuses her there) in one bulk."""
    user = olga.user  # type: ignore[attr-defined]
    return request_bulk(ChangeAction.OFFLOAD, "team in (payments,data)", {}, Actor(user.pk, "olga", "api", "r1"))


def test_a_bulk_records_at_once_and_reports_what_the_push_was_refused(olga: APIClient) -> None:
    """By default (BULK_CHECKS=push) the bulk asks nothing before recording: the push, made as olga,
    is the check, and the namespace the cluster refuses is listed as refused with its reason."""
    bulk = _olga_bulk(olga)
    assert bulk.total == 2 and bulk.skipped == []
    assert bulkpush.apply_bulk(bulk.pk) == 2

    states = dict(ChangeRequest.objects.filter(bulk=bulk).values_list("namespace", "state"))
    assert states == {"alpha": ChangeState.APPLIED, "gamma": ChangeState.FAILED}
    assert kube.get_offloading("gamma") is None and kube.get_offloading("alpha") is not None
    body = olga.get(f"/api/v1/bulk/{bulk.pk}/").json()
    assert [r["namespace"] for r in body["refused"]] == ["gamma"]
    assert 'User "liqo-dash:olga" cannot create resource "namespaceoffloadings"' in body["refused"][0]["reason"]
    assert body["progress"]["failed"] == 1 and body["progress"]["applied"] == 1


def test_with_checks_at_request_the_refused_namespace_is_never_recorded(olga: APIClient, settings: Any) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "BULK_CHECKS": "request"}
    bulk = _olga_bulk(olga)
    assert bulk.total == 1 and list(bulk.changes.values_list("namespace", flat=True)) == ["alpha"]
    assert [s["namespace"] for s in bulk.skipped] == ["gamma"]
    assert "does not allow" in bulk.skipped[0]["reason"]
    assert olga.get(f"/api/v1/bulk/{bulk.pk}/").json()["refused"] == []


def test_an_unknown_bulk_checks_mode_is_a_configuration_error(olga: APIClient, settings: Any) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "BULK_CHECKS": "later"}
    with pytest.raises(ImproperlyConfigured, match="LIQO_DASH_BULK_CHECKS"):
        _olga_bulk(olga)
