"""One naming convention in the API: every field of every request and answer is camelCase, as in
Kubernetes. The answers of every endpoint, with some data behind them, are walked key by key; the only
keys left alone are those of maps whose keys are data (label keys, resource names, field names)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from access.models import ApiToken
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, Namespace, VirtualNode

pytestmark = pytest.mark.django_db

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
# Maps whose keys are data, as paths of keys with [] for any list item (a leading [] is a list answer,
# results[] a page's items). Below them, values are walked again only where they are API objects.
DATA_MAPS = [
    r"(results\[\]\.|^)labels",  # namespace labels
    r"(results\[\]\.|^)virtualNodes\[\]\.(labels|capacity)",  # node labels, resource names
    r"(results\[\]\.|^)modules",  # Liqo module names (keys of the peer's status)
    r"(results\[\]\.|^)(desiredSpec|baseSpec|conflictSpec|spec)(\..*)?\.matchLabels",
    r"(results\[\]\.|^)warnings",  # field name -> warnings
    r"(results\[\]\.|^)(before|after)(\..*)?\.labels",  # labels in an audit event's documents
    r"^errors",  # the preview's errors by request field (snake_case ones included, they are data)
    r"(perNamespace\[\]\.|^)podImpact\.lostClusters",  # cluster id -> pods
    r"^pod(\..*)?\.(labels|annotations|nodeSelector|limits|requests)",  # the sample pod's maps
    r"^expectedGenerations",
]


def bad_keys(value: Any, path: str = "") -> list[str]:
    """The paths of keys that are not camelCase, skipping the keys (not the values) of data maps."""
    found: list[str] = []
    if isinstance(value, list):
        for item in value:
            found += bad_keys(item, f"{path}[]")
    elif isinstance(value, dict):
        data = any(re.search(rf"{pattern}$", path) for pattern in DATA_MAPS)
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not data and not CAMEL.match(str(key)):
                found.append(where)
            if not data:
                found += bad_keys(item, where)
    return found


def test_the_walk_finds_snake_case_and_leaves_data_maps_alone() -> None:
    assert bad_keys({"results": [{"remote_namespace_name": "x", "labels": {"team_a": "1"}}]}) == [
        "results[].remote_namespace_name"
    ]
    assert bad_keys({"podImpact": {"lostClusters": {"my_cluster": 1}}, "causes": [{"a_b": 1}]}) == ["causes[].a_b"]


@pytest.fixture
def api(admin_user: Any) -> APIClient:
    client = APIClient()
    _row, text = ApiToken.issue(admin_user, "names")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {text}")
    return client


@pytest.fixture
def history(api: APIClient, fleet: Any) -> dict[str, int]:
    """A change, a bulk request with its change, and their audit events."""
    Namespace.objects.filter(name="payments").update(labels={"team": "pay", "app.kubernetes.io/part_of": "shop"})
    VirtualNode.objects.filter(cluster_id="milan").update(capacity={"cpu": "8", "ephemeral-storage": "1Ti"})
    body = {"podOffloadingStrategy": "Local", "confirm": True}  # destructive (pods leave the peers): confirmed
    put = api.put("/api/v1/namespaces/shop/offloading/", body, format="json")
    assert put.status_code == 202, put.content
    bulk = api.post("/api/v1/bulk/", {"action": "offload", "namespaceSelector": "team=pay", "spec": {}}, format="json")
    assert bulk.status_code == 201, bulk.content
    return {"change": put.json()["id"], "bulk": bulk.json()["id"], "event": AuditEvent.objects.latest("seq").pk}


def _answers(api: APIClient, ids: dict[str, int]) -> dict[str, Any]:
    gets = [
        "/api/v1/snapshot/",
        "/api/v1/clusters/",
        "/api/v1/clusters/milan/",
        "/api/v1/namespaces/",
        "/api/v1/namespaces/shop/",
        "/api/v1/namespaces/payments/",
        "/api/v1/changes/",
        f"/api/v1/changes/{ids['change']}/",
        "/api/v1/bulk/",
        f"/api/v1/bulk/{ids['bulk']}/",
        "/api/v1/audit/",
        f"/api/v1/audit/{ids['event']}/",
        "/api/v1/audit/export/?format=json",
        "/api/v1/namespaces/nope/",
        "/api/v1/namespaces/?phse=Ready",
    ]
    answers: dict[str, Any] = {}
    for url in gets:
        response = api.get(url)
        assert response.status_code in (200, 400, 404), (url, response.status_code)
        answers[f"GET {url}"] = json.loads(response.getvalue())
    posts = [
        ("/api/v1/namespaces/payments/preview/", {"selectors": ["topology.kubernetes.io/region=eu-west"]}),
        (
            "/api/v1/namespaces/shop/preview/",
            {
                "podOffloadingStrategy": "Remote",
                "pod": {
                    "metadata": {"labels": {"app_name": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        ),
        ("/api/v1/namespaces/payments/preview/", {"namespaceMappingStrategy": "Nope"}),
        ("/api/v1/bulk/", {"action": "offload", "namespaceSelector": "team=pay", "spec": {}, "dryRun": True}),
        ("/api/v1/bulk/", {"action": "unoffload", "namespaceSelector": "!team", "dryRun": True}),
        ("/api/v1/bulk/", {"action": "offload", "namespaceSelector": "team in (pay"}),
    ]
    for url, body in posts:
        response = api.post(url, body, format="json")
        assert response.status_code in (200, 400), (url, response.content)
        answers[f"POST {url} {body}"] = response.json()
    refused = api.put("/api/v1/namespaces/shop/offloading/", {"namespaceMappingStrategy": "DefaultName"}, format="json")
    answers["PUT refused"] = refused.json()
    return answers


def test_every_key_of_every_answer_is_camel_case(api: APIClient, history: dict[str, int]) -> None:
    answers = _answers(api, history)
    assert all(answers.values())
    problems = {what: bad for what, answer in answers.items() if (bad := bad_keys(answer))}
    assert not problems


def test_the_old_names_are_gone_from_answers_and_the_schema(api: APIClient, history: dict[str, int]) -> None:
    shop = api.get("/api/v1/namespaces/shop/").json()
    assert shop["remoteNamespaceName"] == "shop" and "remote_namespace_name" not in shop
    assert shop["clusters"][0]["clusterId"] == "milan"
    change = api.get(f"/api/v1/changes/{history['change']}/").json()
    assert change["requesterName"] == "admin" and change["desiredSpec"]["podOffloadingStrategy"] == "Local"
    assert api.get(f"/api/v1/bulk/{history['bulk']}/").json()["namespaceSelector"] == "team=pay"
    assert api.get("/api/v1/clusters/milan/").json()["virtualNodes"][0]["capacity"]["ephemeral-storage"] == "1Ti"
    schema = api.get("/api/schema/", {"format": "json"}).json()
    for name, component in schema["components"]["schemas"].items():
        for field in component.get("properties", {}):
            assert CAMEL.match(field), (name, field)


def test_the_old_request_names_are_accepted(api: APIClient, fleet: Any) -> None:
    """Requests were camelCase already; snake_case spellings of their fields are read as aliases."""
    dry = api.post(
        "/api/v1/bulk/",
        {
            "action": "offload",
            "namespace_selector": "team=pay",
            "spec": {"pod_offloading_strategy": "Remote"},
            "dry_run": True,
        },
        format="json",
    )
    assert dry.status_code == 200, dry.content
    assert dry.json()["namespaces"] == ["payments"] and not BulkRequest.objects.exists()
    put = api.put(
        "/api/v1/namespaces/payments/offloading/",
        {"pod_offloading_strategy": "Remote", "label_namespace": True},
        format="json",
    )
    assert put.status_code == 202, put.content
    change = ChangeRequest.objects.get()
    assert (change.desired_spec or {})["podOffloadingStrategy"] == "Remote" and change.label_namespace
    both = api.put(
        "/api/v1/namespaces/payments/offloading/",
        {"podOffloadingStrategy": "Remote", "pod_offloading_strategy": "Local"},
        format="json",
    )
    assert both.status_code == 400 and both.json()["details"]["causes"][0]["field"] == "pod_offloading_strategy"
