"""The preview's JSON (offloading.api.renderers.PreviewJSONRenderer): the bytes DRF's JSONRenderer writes,
with the verdicts of virtual nodes alike for the selector encoded once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from offloading.api.renderers import PreviewJSONRenderer
from offloading.models import Cluster, VirtualNode

PREVIEW = "/api/v1/namespaces/payments/preview/"


def _same_bytes(data: Any, media_type: str | None = "application/json", context: Any = None) -> bytes:
    fast = PreviewJSONRenderer().render(data, media_type, context)
    assert fast == JSONRenderer().render(data, media_type, context)
    return fast


def _terms(*failed: str | None) -> list[dict[str, Any]]:
    return [{"index": i, "matched": f is None, "failed": f, "invalid": None} for i, f in enumerate(failed)]


def test_shapes_are_written_as_json_renderer_writes_them() -> None:
    shared = _terms(None, "region In (a,b,… 98 more) but the cluster has region=z\u2028")
    row = {"clusterId": "é", "selected": True, "note": "", "error": None, "virtualNodesDisagree": False}
    answer = {
        "valid": True,
        "clusters": [
            {**row, "explanations": [{"virtualNode": "vn-1", "selected": True, "terms": shared}]},
            {**row, "explanations": [{"virtualNode": "vn-2", "selected": False, "terms": shared}, {"terms": []}]},
            {**row, "explanations": []},
            {"explanations": [{"terms": shared, "after": 1}, {"terms": "not a list"}, "x", {1: "key"}, {}]},
            {"explanations": "not a list"},
            {"explanations": [], "after": 1},
            {1: "not text", "explanations": []},
            {},
            "x",
            [],
        ],
        "manifest": "a: b\n---\n\u2029",
        "spec": {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": []}]}},
    }
    text = _same_bytes(answer).decode()
    assert text.count("\\u2028") == 3 and "\u2028" not in text and "\\u2029" in text
    assert json.loads(text)["clusters"][1]["explanations"][0]["terms"] == shared
    for other in ({}, {"clusters": "x"}, {"clusters": []}, {1: 2, "clusters": []}, [1, 2], "x", None, {"a": 1}):
        _same_bytes(other)
    # Indented answers (Accept: application/json; indent=2, or the browsable API's context) are JSONRenderer's.
    indented = _same_bytes(answer, "application/json; indent=2")
    assert indented.startswith(b'{\n  "valid": true')
    assert _same_bytes(answer, None, {"indent": 4}).startswith(b'{\n    "valid"')


@pytest.mark.django_db
def test_the_api_preview_answer_is_json_renderer_s_with_alike_nodes_sharing_their_terms(
    api: APIClient,
    fleet: Any,
) -> None:
    for cluster_id in ("turin", "venice", "bari"):
        region = "eu-south" if cluster_id == "bari" else "eu-west"
        Cluster.objects.create(cluster_id=cluster_id, name=cluster_id, role="Provider")
        VirtualNode.objects.create(
            namespace=f"liqo-tenant-{cluster_id}",
            name=cluster_id,
            cluster_id=cluster_id,
            labels={"topology.kubernetes.io/region": region, "liqo.io/remote-cluster-id": cluster_id},
        )
    body = {
        "selectors": ["topology.kubernetes.io/region in (eu-south,x1,x2,x3,x4,x5,x6,x7,x8,x9,x10,x11),!staging", "tier"]
    }
    response = api.post(PREVIEW, body, format="json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.content == JSONRenderer().render(response.data)
    answer = response.json()
    assert answer["selected"] == ["bari", "naples"]
    clusters = {row["clusterId"]: row for row in response.data["clusters"]}
    terms = {cluster_id: clusters[cluster_id]["explanations"][0]["terms"] for cluster_id in clusters}
    # milan, turin and venice are alike for the selector (eu-west, no tier, no staging): one list of terms.
    assert terms["milan"] is terms["turin"] is terms["venice"] and terms["bari"] is terms["naples"]
    assert terms["milan"] is not terms["naples"]
    west = next(row for row in answer["clusters"] if row["clusterId"] == "turin")["explanations"][0]
    assert west["virtualNode"] == "turin" and west["terms"][0]["failed"].startswith(
        "topology.kubernetes.io/region In (eu-south,x1,"
    )
    assert "… 2 more) but the cluster has topology.kubernetes.io/region=eu-west" in west["terms"][0]["failed"]
    indented = api.post(PREVIEW, body, format="json", HTTP_ACCEPT="application/json; indent=2")
    assert indented.content == JSONRenderer().render(indented.data, "application/json; indent=2")
    assert json.loads(indented.content) == answer and indented.content.startswith(b'{\n  "valid": true')
    invalid = api.post(PREVIEW, {"selectors": ["x in (a"]}, format="json")
    assert invalid.status_code == 200 and invalid.json()["valid"] is False
    assert invalid.content == JSONRenderer().render(invalid.data)
