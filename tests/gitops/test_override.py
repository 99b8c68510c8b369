"""A direct push that Argo CD or Flux would undo is refused (409 on gitopsOverride, naming who manages
the offloading) at every entry point, unless overridden; an override is said in the audit trail."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from offloading.choices import AuditAction, ChangeAction
from offloading.gitops.detect import facts
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, Namespace

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
EDIT_FORM = {
    "pod_offloading_strategy": "LocalAndRemote",
    "cluster_selector": "topology.kubernetes.io/region in (eu-west, eu-south)",
    "expected_generation": "3",
}
WHO = "Managed by Flux (Kustomization flux-system/apps)"


def _flux(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {
            "name": "offloading",
            "namespace": "shop",
            "labels": {
                "kustomize.toolkit.fluxcd.io/name": "apps",
                "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
                **(labels or {}),
            },
        },
    }


@pytest.fixture
def managed(fleet: Any) -> Any:
    Namespace.objects.filter(name="shop").update(gitops_facts=facts(_flux()), labels={"env": "prod"})
    return fleet


def _refused(response: Any) -> None:
    assert response.status_code == 409, response.content
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Conflict", 409)
    assert [c["field"] for c in status["details"]["causes"]] == ["gitopsOverride"]
    assert WHO in status["message"]


def _override_row() -> AuditEvent:
    row = AuditEvent.objects.get(action=AuditAction.REQUESTED, namespace="shop")
    assert "GitOps override" in row.message and "managed by Flux (Kustomization flux-system/apps)" in row.message
    return row


def test_the_api_edit_is_refused_unless_overridden(api: Any, managed: Any) -> None:
    url = "/api/v1/namespaces/shop/offloading/"
    _refused(api.put(url, {"clusterSelector": GAINS}, format="json"))
    assert not ChangeRequest.objects.exists()
    assert api.put(url, {"clusterSelector": GAINS, "gitopsOverride": True}, format="json").status_code == 202
    assert _override_row().change == ChangeRequest.objects.get()


def test_the_api_unoffload_needs_the_override_in_the_query(api: Any, managed: Any) -> None:
    url = "/api/v1/namespaces/shop/offloading/?confirm=true"
    _refused(api.delete(url))
    bad = api.delete(url + "&gitopsOverride=maybe")
    assert bad.status_code == 400 and bad.json()["details"]["causes"][0]["field"] == "gitopsOverride"
    assert not ChangeRequest.objects.exists()
    assert api.delete(url + "&gitopsOverride=true").status_code == 202
    assert ChangeRequest.objects.get().action == ChangeAction.UNOFFLOAD
    _override_row()


def test_flux_reconcile_disabled_is_not_refused(api: Any, fleet: Any) -> None:
    disabled = facts(_flux({"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}))
    Namespace.objects.filter(name="shop").update(gitops_facts=disabled)
    assert api.put("/api/v1/namespaces/shop/offloading/", {"clusterSelector": GAINS}, format="json").status_code == 202
    assert AuditEvent.objects.get(action=AuditAction.REQUESTED).message == ""


def test_an_unmanaged_offloading_asks_nothing(api: Any, fleet: Any) -> None:
    assert api.put("/api/v1/namespaces/shop/offloading/", {"clusterSelector": GAINS}, format="json").status_code == 202


def test_the_edit_form_shows_the_reason_and_the_checkbox(admin_client: Any, managed: Any) -> None:
    url = reverse("offloading:namespace_offload", args=["shop"])
    page = admin_client.get(url).content.decode()
    assert WHO in page and 'name="gitops_override"' in page
    refused = admin_client.post(url, EDIT_FORM)
    assert refused.status_code == 200
    assert WHO in " ".join(refused.context["form"].errors["gitops_override"])
    assert not ChangeRequest.objects.exists()
    assert admin_client.post(url, {**EDIT_FORM, "gitops_override": "on"}).status_code == 302
    _override_row()


def test_the_unoffload_page_needs_the_override(admin_client: Any, managed: Any) -> None:
    url = reverse("offloading:namespace_unoffload", args=["shop"])
    assert 'name="gitops_override"' in admin_client.get(url).content.decode()
    refused = admin_client.post(url, {"confirm": "shop", "expected_generation": "3"})
    assert refused.status_code == 200 and WHO in " ".join(refused.context["form"].errors["gitops_override"])
    assert not ChangeRequest.objects.exists()
    form = {"confirm": "shop", "expected_generation": "3", "gitops_override": "on"}
    assert admin_client.post(url, form).status_code == 302
    _override_row()


def test_a_bulk_leaves_managed_namespaces_out_with_the_reason(api: Any, managed: Any) -> None:
    Namespace.objects.filter(name="payments").update(labels={"env": "prod"})
    body = {
        "action": "offload",
        "namespaceSelector": "env=prod",
        "spec": {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": GAINS},
    }
    plan = api.post("/api/v1/bulk/", {**body, "dryRun": True}, format="json").json()
    skipped = {s["namespace"]: s["reason"] for s in plan["skipped"]}
    assert WHO in skipped["shop"]
    created = api.post("/api/v1/bulk/", body, format="json")
    assert created.status_code == 201, created.content
    bulk = BulkRequest.objects.get()
    assert [c.namespace for c in bulk.changes.all()] == ["payments"]
    assert WHO in {s["namespace"]: s["reason"] for s in bulk.skipped}["shop"]


def test_a_reapply_in_the_api_needs_the_override(api: Any, managed: Any) -> None:
    shop = Namespace.objects.get(name="shop")
    base = shop.offloading_spec
    conflicted = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        base_spec=base,
        desired_spec={**base, "clusterSelector": GAINS},
        state="conflict",
        requester_name="admin",
        source="api",
    )
    url = f"/api/v1/changes/{conflicted.pk}/reapply/"
    _refused(api.post(url, {}, format="json"))
    assert api.post(url, {"gitopsOverride": True}, format="json").status_code == 202
    _override_row()
