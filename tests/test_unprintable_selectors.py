"""Selectors liqoctl cannot print (the API server accepts them from kubectl or GitOps tools) must not
break bulk: the demo's data-pipeline offloading has the value ``eu south 1``."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from offloading.models import Namespace

pytestmark = pytest.mark.django_db

UNPRINTABLE = {
    "namespaceMappingStrategy": "EnforceSameName",
    "podOffloadingStrategy": "LocalAndRemote",
    "clusterSelector": {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu south 1", "eu-west"]}
                ]
            }
        ]
    },
}


@pytest.fixture
def unprintable(fleet: Any) -> None:
    Namespace.objects.filter(name="shop").update(offloading_spec=UNPRINTABLE, labels={"team": "shop"})


def test_bulk_dry_run_of_an_offloading_with_an_unprintable_selector_answers(unprintable: None, admin_user: Any) -> None:
    client = APIClient()
    client.force_authenticate(admin_user)
    body = {
        "action": "offload",
        "namespaceSelector": "team=shop",
        "dryRun": True,
        "spec": {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": {"nodeSelectorTerms": []}},
    }
    response = client.post("/api/v1/bulk/", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["namespaces"] == ["shop"]
    assert response.json()["impact"]["remoteNamespacesDeleted"] == 0


def test_the_bulk_page_preview_of_it_renders(unprintable: None, admin_client: Any) -> None:
    data = {
        "action": "offload",
        "namespace_selector": "team=shop",
        "namespace_mapping_strategy": "EnforceSameName",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": "",
    }
    page = admin_client.post("/bulk/preview/", data, HTTP_HX_REQUEST="true")
    assert page.status_code == 200
    assert b"eu south 1" in page.content and b"liqoctl cannot print this term" in page.content
