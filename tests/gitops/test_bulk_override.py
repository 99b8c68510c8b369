"""A bulk leaves out the namespaces Argo CD or Flux manages unless it overrides GitOps (gitopsOverride in
the API, a checkbox on the bulk form); an included one's requested audit row says it overrode GitOps,
as a single change's does."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.choices import AuditAction
from offloading.gitops.detect import facts
from offloading.models import AuditEvent, BulkRequest, Namespace
from tests.gitops.test_override import WHO, _flux

pytestmark = pytest.mark.django_db

GAINS = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south"]}]}
    ]
}
BODY = {
    "action": "offload",
    "namespaceSelector": "env=prod",
    "spec": {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": GAINS},
    "confirm": True,
}


@pytest.fixture
def managed(fleet: Any) -> Any:
    Namespace.objects.filter(name="shop").update(gitops_facts=facts(_flux()), labels={"env": "prod"})
    Namespace.objects.filter(name="payments").update(labels={"env": "prod"})
    return fleet


def _override_rows() -> dict[str, str]:
    return {e.namespace: e.message for e in AuditEvent.objects.filter(action=AuditAction.REQUESTED)}


def test_the_api_includes_managed_namespaces_when_overridden(api: Any, managed: Any) -> None:
    plan = api.post("/api/v1/bulk/", {**BODY, "dryRun": True, "gitopsOverride": True}, format="json")
    assert plan.status_code == 200, plan.content
    assert sorted(plan.json()["namespaces"]) == ["payments", "shop"] and plan.json()["skipped"] == []
    without = api.post("/api/v1/bulk/", {**BODY, "dryRun": True}, format="json").json()
    assert without["namespaces"] == ["payments"] and WHO in without["skipped"][0]["reason"]

    created = api.post("/api/v1/bulk/", {**BODY, "gitopsOverride": True}, format="json")
    assert created.status_code == 201, created.content
    bulk = BulkRequest.objects.get()
    assert sorted(bulk.changes.values_list("namespace", flat=True)) == ["payments", "shop"] and bulk.skipped == []
    rows = _override_rows()
    assert "GitOps override" in rows["shop"] and "managed by Flux (Kustomization flux-system/apps)" in rows["shop"]
    assert rows["payments"] == ""  # not managed: nothing to override
    bad = api.post("/api/v1/bulk/", {**BODY, "gitopsOverride": "maybe"}, format="json")
    assert bad.status_code == 400 and bad.json()["details"]["causes"][0]["field"] == "gitopsOverride"


def test_the_bulk_form_has_the_checkbox(admin_client: Any, managed: Any) -> None:
    form = {
        "action": "offload",
        "namespace_selector": "env=prod",
        "namespace_mapping_strategy": "EnforceSameName",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": "topology.kubernetes.io/region in (eu-south)",
    }
    page = admin_client.get("/bulk/").content.decode()
    assert 'name="gitops_override"' in page and "managed from Git" in page
    preview = admin_client.post("/bulk/preview/", form).content.decode()
    assert WHO in preview
    preview = admin_client.post("/bulk/preview/", {**form, "gitops_override": "on"}).content.decode()
    assert WHO not in preview

    response = admin_client.post("/bulk/", {**form, "gitops_override": "on", "confirm_count": "2"})
    assert response.status_code == 302, response.content.decode()[-2000:]
    bulk = BulkRequest.objects.get()
    assert sorted(bulk.changes.values_list("namespace", flat=True)) == ["payments", "shop"]
    assert "GitOps override" in _override_rows()["shop"]
