"""The running pods a change hits and the room on the clusters it selects: the pure computation
(offloading.whatif.pods), the edit, unoffload and bulk previews, and the API preview."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from offloading.models import Cluster, Namespace, VirtualNode
from offloading.models.inventory import Pod
from offloading.whatif.pods import LOCAL, pod_impact, stricter
from offloading.whatif.preview import preview
from tests.fixtures.snapshot import READY_SPEC

REMOTE = {**READY_SPEC, "podOffloadingStrategy": "Remote"}
LOCAL_ONLY = {**READY_SPEC, "podOffloadingStrategy": "Local"}


@pytest.mark.parametrize(
    ("before", "after", "where"),
    [
        ("LocalAndRemote", "Remote", "local"),
        ("Local", "Remote", "local"),
        ("LocalAndRemote", "Local", "remote"),
        ("Remote", "Local", "remote"),
        ("Remote", "LocalAndRemote", ""),
        ("Local", "LocalAndRemote", ""),
        ("Remote", "Remote", ""),
    ],
)
def test_which_pods_a_stricter_strategy_leaves_out(before: str, after: str, where: str) -> None:
    assert stricter(before, after) == where


def test_pods_on_lost_clusters_are_counted_once() -> None:
    running = {LOCAL: 3, "milan": 2, "naples": 4}
    to_local = pod_impact(running, ["milan"], READY_SPEC, LOCAL_ONLY)
    assert to_local.lost == {"milan": 2} and to_local.on_lost_clusters == 2
    assert to_local.off_strategy == 4 and to_local.off_where == "remote", "naples' pods; milan's already counted"
    to_remote = pod_impact(running, [], READY_SPEC, REMOTE)
    assert to_remote.lost == {} and to_remote.off_strategy == 3 and to_remote.off_where == "local"
    same = pod_impact(running, [], READY_SPEC, {**READY_SPEC})
    assert not same.any and not same.risky
    gone = pod_impact(running, [], READY_SPEC, None, unoffload=True)
    assert gone.lost == {"milan": 2, "naples": 4} and gone.off_strategy == 0 and gone.risky
    assert gone.as_api()["runningOnLostClusters"] == 6


def test_a_change_that_loses_no_pod_says_so() -> None:
    impact = pod_impact({LOCAL: 1}, ["milan"], READY_SPEC, REMOTE)
    assert impact.lost == {} and impact.off_strategy == 1
    quiet = pod_impact({"naples": 1}, ["milan"], READY_SPEC, READY_SPEC)
    assert quiet.risky and not quiet.any


def _pods() -> None:
    for name, cluster, phase in (
        ("web-1", "milan", "Running"),
        ("web-2", "milan", "Running"),
        ("web-3", "milan", "Pending"),
        ("db-0", "", "Running"),
    ):
        Pod.objects.create(
            namespace="shop",
            name=name,
            node_name=cluster or "local-1",
            cluster_id=cluster,
            phase=phase,
            cpu_millis=3000,
            memory_bytes=1024**3,
        )


@pytest.mark.django_db
def test_the_edit_preview_counts_the_pods_deleted_and_those_a_stricter_strategy_leaves_out(
    admin_client: Any,
    fleet: Any,
) -> None:
    _pods()
    url = reverse("offloading:namespace_offload_preview", args=["shop"])
    body = admin_client.post(
        url, {"pod_offloading_strategy": "LocalAndRemote", "cluster_selector": "topology.kubernetes.io/region=eu-south"}
    ).content.decode()
    assert '<strong>2 running pods</strong> on <span class="chip bad">milan: 2</span> will be deleted there' in body
    body = admin_client.post(
        url, {"pod_offloading_strategy": "Remote", "cluster_selector": "topology.kubernetes.io/region=eu-west"}
    ).content.decode()
    assert (
        "<strong>1 running pod</strong> on local nodes no longer satisfy the pod strategy <code>Remote</code>" in body
    )
    assert "will be deleted there" not in body
    body = admin_client.post(
        url, {"pod_offloading_strategy": "LocalAndRemote", "cluster_selector": "topology.kubernetes.io/region=eu-west"}
    ).content.decode()
    assert 'id="pod-impact"' in body and "running pod" not in body, "nothing changes: nothing to say"


@pytest.mark.django_db
def test_the_offload_preview_shows_the_room_and_flags_nearly_full_clusters(admin_client: Any, fleet: Any) -> None:
    _pods()  # 6000m of milan's 8 CPUs: 75 %
    url = reverse("offloading:namespace_offload_preview", args=["payments"])
    form = {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "LocalAndRemote"}
    body = admin_client.post(url, form).content.decode()
    assert "CPU <strong>6</strong> of 8 (75%)" in body and "nearly full" not in body
    Pod.objects.create(namespace="shop", name="web-4", cluster_id="milan", phase="Running", cpu_millis=500)
    body = admin_client.post(url, form).content.decode()
    assert '2 of 2 clusters selected</strong> <span class="badge warn" id="nearly-full-summary">1 of them' in body
    assert "nearly full: cpu 81%" in body
    body = admin_client.post(url, {**form, "cluster_selector": "topology.kubernetes.io/region=eu-south"}).content
    assert b"nearly full" not in body and b"CPU <strong>0</strong> of 8 (0%)" in body, "only the selected clusters"


@pytest.mark.django_db
def test_the_preview_costs_the_same_queries_for_two_or_forty_clusters(fleet: Any) -> None:
    shop = Namespace.objects.get(name="shop")
    _pods()
    with CaptureQueriesContext(connection) as few:
        preview(shop, {**READY_SPEC, "clusterSelector": None})
    for i in range(40):
        Cluster.objects.create(cluster_id=f"p{i}", name=f"p{i}")
        VirtualNode.objects.create(namespace=f"t-{i}", name=f"p{i}", cluster_id=f"p{i}", capacity={"cpu": "2"})
        Pod.objects.create(namespace="shop", name=f"x{i}", cluster_id=f"p{i}", phase="Running")
    with CaptureQueriesContext(connection) as many:
        result = preview(shop, {**READY_SPEC, "clusterSelector": None})
    assert len(result.rooms) == 42 and len(many) == len(few)


@pytest.mark.django_db
def test_the_unoffload_page_counts_the_pods_that_go(admin_client: Any, fleet: Any) -> None:
    _pods()
    page = admin_client.get(reverse("offloading:namespace_unoffload", args=["shop"])).content.decode()
    assert '<strong>2 running pods</strong> on <span class="chip bad">milan: 2</span> will be deleted there' in page
    Pod.objects.filter(cluster_id="milan").delete()
    page = admin_client.get(reverse("offloading:namespace_unoffload", args=["shop"])).content.decode()
    assert "No running pod is hit: none runs on a peer" in page


@pytest.mark.django_db
def test_the_bulk_preview_counts_pods_per_namespace_and_shows_the_room(admin_client: Any, fleet: Any) -> None:
    _pods()
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    form = {
        "action": "offload",
        "namespace_selector": "env=prod",
        "namespace_mapping_strategy": "EnforceSameName",
        "pod_offloading_strategy": "Local",
        "cluster_selector": "topology.kubernetes.io/region in (eu-south)",
    }
    body = admin_client.post(reverse("offloading:bulk_preview"), form).content.decode()
    assert "<strong>2 running pods</strong> on those clusters will be deleted there" in body
    assert "<strong>2</strong> deleted (milan: 2)" in body
    assert 'id="bulk-rooms"><strong>The spec selects 1 cluster</strong>' in body and ">naples</a></th>" in body
    unoffload = {
        "action": "unoffload",
        "namespace_selector": "env=prod",
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
    }
    body = admin_client.post(reverse("offloading:bulk_preview"), unoffload).content.decode()
    assert "<strong>2</strong> deleted (milan: 2)" in body and 'id="bulk-rooms"' not in body


@pytest.mark.django_db
def test_the_api_preview_returns_the_pod_impact_and_the_room(admin_user: Any, fleet: Any) -> None:
    _pods()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    answer = api.post(
        "/api/v1/namespaces/shop/preview/",
        {"podOffloadingStrategy": "Remote", "selectors": ["topology.kubernetes.io/region=eu-south"]},
        format="json",
    ).json()
    assert answer["valid"] and answer["losses"] == ["milan"]
    assert answer["podImpact"]["runningOnLostClusters"] == 2 and answer["podImpact"]["lostClusters"] == {"milan": 2}
    assert answer["podImpact"]["offStrategy"] == 1 and answer["podImpact"]["offStrategyWhere"] == "local"
    assert [room["clusterId"] for room in answer["capacity"]] == ["naples"] and answer["nearlyFull"] == []
    assert answer["capacity"][0]["allocatable"]["cpu"] == 8 and answer["capacity"][0]["percent"]["pods"] is None
    fresh = api.post("/api/v1/namespaces/payments/preview/", {}, format="json").json()
    assert fresh["podImpact"]["followed"] is False
    assert {room["clusterId"]: room["nearlyFull"] for room in fresh["capacity"]} == {"milan": False, "naples": False}


def _json_schema(node: Any, components: dict[str, Any]) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema: references inlined, ``nullable`` as a null type."""
    if isinstance(node, list):
        return [_json_schema(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _json_schema(components[node["$ref"].rsplit("/", 1)[-1]], components)
    out = {key: _json_schema(value, components) for key, value in node.items() if key != "nullable"}
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


@pytest.mark.django_db
def test_the_api_preview_with_pods_and_a_nearly_full_cluster_matches_its_schema(admin_user: Any, fleet: Any) -> None:
    import jsonschema
    from drf_spectacular.generators import SchemaGenerator

    _pods()
    Pod.objects.create(namespace="shop", name="web-4", cluster_id="milan", phase="Running", cpu_millis=2500)
    spec = SchemaGenerator().get_schema(public=True)
    operation = spec["paths"]["/api/v1/namespaces/{name}/preview/"]["post"]
    body_schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    schema = _json_schema(body_schema, spec["components"]["schemas"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    answer = api.post("/api/v1/namespaces/shop/preview/", {"podOffloadingStrategy": "Local"}, format="json").json()
    assert answer["nearlyFull"] == ["milan"] and answer["podImpact"]["offStrategy"] == 3
    jsonschema.validate(answer, schema)
    answer["capacity"][0]["percent"]["cpu"] = "81%"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(answer, schema)
