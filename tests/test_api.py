"""The REST API over the same snapshot and services as the pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from offloading.models import ChangeRequest, Namespace

pytestmark = pytest.mark.django_db


def test_the_schema_is_served_and_lists_the_offloading_endpoints(api: APIClient) -> None:
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/namespaces/{name}/offloading/" in paths
    assert {"put", "delete"} <= set(paths["/api/v1/namespaces/{name}/offloading/"])
    assert api.get("/api/docs/").status_code == 200


def test_the_api_needs_authentication(fleet: Any) -> None:
    response = APIClient().get("/api/v1/namespaces/")
    assert response.status_code in (401, 403)


def test_namespaces_are_listed_with_filters_and_freshness_headers(api: APIClient, fleet: Any) -> None:
    response = api.get("/api/v1/namespaces/", {"phase": "Ready"})
    assert response.status_code == 200
    names = [n["name"] for n in response.json()["results"]]
    assert names == ["shop"]
    assert response["X-Snapshot-Stale"] == "true"  # the fleet fixture never refreshed
    detail = api.get("/api/v1/namespaces/shop/")
    assert detail["ETag"] == '"3"'
    body = detail.json()
    assert body["phase"] == "Ready" and body["clusters"][0]["clusterId"] == "milan"


def test_put_offloading_queues_a_change_and_answers_202(api: APIClient, fleet: Any) -> None:
    response = api.put(
        "/api/v1/namespaces/payments/offloading/",
        {"podOffloadingStrategy": "Remote", "selectors": ["topology.kubernetes.io/region=eu-west"]},
        format="json",
    )
    assert response.status_code == 202, response.json()
    change = ChangeRequest.objects.get()
    assert response.json()["id"] == change.pk and change.source == "api" and change.requester_name == "admin"
    assert change.desired_spec["namespaceMappingStrategy"] == "DefaultName"
    assert change.desired_spec["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "eu-west"
    ]


def _status_fields(response: Any) -> list[str]:
    """The fields a Kubernetes-style Status body names in its causes."""
    body = response.json()
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == response.status_code
    return [cause["field"] for cause in body["details"]["causes"]]


def test_bad_input_gets_an_error_on_the_field(api: APIClient, fleet: Any) -> None:
    # Malformed requests (types, enums, selector syntax) are the serializer's: 400 on the field.
    cases = [
        ({"podOffloadingStrategy": "Anywhere"}, "podOffloadingStrategy"),
        ({"selectors": ["region in (eu"]}, "selectors"),
        ({"clusterSelector": "region=eu"}, "clusterSelector"),
    ]
    for body, field in cases:
        response = api.put("/api/v1/namespaces/payments/offloading/", body, format="json")
        assert response.status_code == 400, body
        assert _status_fields(response) == [field], (body, response.json())
    # What Liqo's rules refuse is the change flow's: 422 Status with the spec field as the cause.
    response = api.put(
        "/api/v1/namespaces/payments/offloading/", {"namespaceMappingStrategy": "SelectedName"}, format="json"
    )
    assert response.status_code == 422
    assert _status_fields(response) == ["spec.remoteNamespaceName"]
    assert response.json()["reason"] == "Invalid"
    assert api.put("/api/v1/namespaces/nope/offloading/", {}, format="json").status_code == 404
    assert not ChangeRequest.objects.exists()


def test_editing_keeps_omitted_fields_and_refuses_immutable_changes(api: APIClient, fleet: Any) -> None:
    # LocalAndRemote to Local is destructive (pods on the peers go local once recreated): confirmed.
    body = {"podOffloadingStrategy": "Local", "confirm": True}
    response = api.put("/api/v1/namespaces/shop/offloading/", body, format="json")
    assert response.status_code == 202
    change = ChangeRequest.objects.get()
    assert change.action == "update" and change.desired_spec["namespaceMappingStrategy"] == "EnforceSameName"
    assert any("more restrictive" in w for w in change.warnings)
    response = api.put(
        "/api/v1/namespaces/shop/offloading/", {"namespaceMappingStrategy": "DefaultName"}, format="json"
    )
    assert response.status_code == 422 and _status_fields(response) == ["spec.namespaceMappingStrategy"]


def test_if_match_with_an_old_generation_fails_with_412(api: APIClient, fleet: Any) -> None:
    response = api.put(
        "/api/v1/namespaces/shop/offloading/", {"podOffloadingStrategy": "Local"}, format="json", HTTP_IF_MATCH='"2"'
    )
    assert response.status_code == 412
    response = api.delete("/api/v1/namespaces/shop/offloading/?confirm=true", HTTP_IF_MATCH='"3"')
    assert response.status_code == 202 and response.json()["action"] == "unoffload"
    assert ChangeRequest.objects.get().base_generation == 3


def test_preview_reports_clusters_and_errors(api: APIClient, fleet: Any) -> None:
    ok = api.post(
        "/api/v1/namespaces/payments/preview/", {"selectors": ["topology.kubernetes.io/region=eu-south"]}, format="json"
    ).json()
    assert ok["valid"] and ok["selected"] == ["naples"]
    milan = next(c for c in ok["clusters"] if c["clusterId"] == "milan")
    assert "eu-west" in milan["explanations"][0]["terms"][0]["failed"]
    assert ok["terms"] == ["topology.kubernetes.io/region=eu-south"]  # written once, not per virtual node
    assert "text" not in milan["explanations"][0]["terms"][0]
    assert ok["remoteNamespaceName"] == "payments-rome"
    bad = api.post("/api/v1/namespaces/payments/preview/", {"namespaceMappingStrategy": "Nope"}, format="json")
    assert bad.status_code == 200 and not bad.json()["valid"] and "namespaceMappingStrategy" in bad.json()["errors"]
    assert not ChangeRequest.objects.exists()


def test_bulk_dry_run_and_create(api: APIClient, fleet: Any) -> None:
    body = {"action": "offload", "namespaceSelector": "team=pay", "spec": {"podOffloadingStrategy": "Remote"}}
    dry = api.post("/api/v1/bulk/", {**body, "dryRun": True}, format="json")
    assert dry.status_code == 200 and dry.json()["namespaces"] == ["payments"]
    assert not ChangeRequest.objects.exists()
    created = api.post("/api/v1/bulk/", body, format="json")
    assert created.status_code == 201 and created.json()["total"] == 1
    assert api.get(reverse("api:bulkrequest-detail", args=[created.json()["id"]])).json()["progress"]["queued"] == 1
    bad = api.post("/api/v1/bulk/", {"action": "offload", "namespaceSelector": "team in (pay"}, format="json")
    assert bad.status_code == 400


def test_bulk_dry_run_says_what_the_changes_do_to_pods_and_room(api: APIClient, fleet: Any) -> None:
    from offloading.models.inventory import Pod

    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    for name, cluster in (("web-1", "milan"), ("web-2", "milan"), ("web-3", "")):
        Pod.objects.create(
            namespace="shop",
            name=name,
            node_name=cluster or "rome-worker-1",
            cluster_id=cluster,
            phase="Running",
            cpu_millis=500,
        )
    body = {
        "action": "offload",
        "namespaceSelector": "env=prod",
        "dryRun": True,
        "spec": {
            "podOffloadingStrategy": "Remote",
            "namespaceMappingStrategy": "EnforceSameName",
            "clusterSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south"]}
                        ]
                    }
                ]
            },
        },
    }
    dry = api.post("/api/v1/bulk/", body, format="json")
    assert dry.status_code == 200, dry.content
    answer = dry.json()
    assert answer["namespaces"] == ["shop"]
    impact = answer["impact"]
    assert impact["remoteNamespacesDeleted"] == 1 and impact["runningPodsOnLostClusters"] == 2
    assert impact["podsOffStrategy"] == 1  # the local pod, under the stricter Remote strategy
    [row] = impact["perNamespace"]
    assert row["namespace"] == "shop" and row["losses"] == ["milan"] and row["gains"] == ["naples"]
    assert row["podImpact"]["lostClusters"] == {"milan": 2} and row["podImpact"]["offStrategyWhere"] == "local"
    assert [room["clusterId"] for room in answer["capacity"]] == ["naples"] and answer["nearlyFull"] == []
    assert answer["capacity"][0]["allocatable"]["cpu"] == 8
    assert not ChangeRequest.objects.exists()


def test_clusters_and_audit_are_readable(api: APIClient, fleet: Any) -> None:
    clusters = api.get("/api/v1/clusters/").json()["results"]
    milan = next(c for c in clusters if c["clusterId"] == "milan")
    assert (
        milan["hostedNamespaces"] == 1
        and milan["virtualNodes"][0]["labels"]["topology.kubernetes.io/region"] == "eu-west"
    )
    api.put("/api/v1/namespaces/payments/offloading/", {}, format="json")
    events = api.get("/api/v1/audit/", {"namespace": "payments"}).json()["results"]
    assert [e["action"] for e in events] == ["requested"] and events[0]["source"] == "api"


def test_absurd_input_is_a_400_or_an_invalid_preview_never_a_500(api: APIClient, fleet: Any) -> None:
    response = api.put("/api/v1/namespaces/payments/offloading/", {"expectedGeneration": 10**30}, format="json")
    assert response.status_code == 400 and _status_fields(response) == ["expectedGeneration"]
    for pod in ("x", {"spec": 5}, {"spec": {"affinity": "none", "tolerations": 3}}):
        response = api.post("/api/v1/namespaces/payments/preview/", {"pod": pod}, format="json")
        assert response.status_code == 200 and response.json()["valid"] is False, pod
    response = api.post(
        "/api/v1/bulk/", {"action": "offload", "namespaceSelector": "team=pay", "spec": {}}, format="json"
    )
    assert response.status_code == 201
    response = api.post(
        "/api/v1/bulk/", {"action": "offload", "namespaceSelector": "team=pay", "spec": {"unknown": 1}}, format="json"
    )
    assert response.status_code in (201, 400)
    assert (
        api.put("/api/v1/namespaces/payments/offloading/", {"selectors": [1, None]}, format="json").status_code == 400
    )


def test_the_api_filters_namespaces_by_label_selector_and_rejects_a_bad_one(api: APIClient, fleet: Any) -> None:
    names = [n["name"] for n in api.get("/api/v1/namespaces/", {"selector": "team"}).json()["results"]]
    assert names == ["payments"]
    bad = api.get("/api/v1/namespaces/", {"selector": "team in (pay"})
    assert bad.status_code == 400 and _status_fields(bad) == ["selector"]


def test_reapply_only_takes_a_change_in_conflict(api: APIClient, fleet: Any) -> None:
    queued = api.put("/api/v1/namespaces/payments/offloading/", {}, format="json").json()
    response = api.post(f"/api/v1/changes/{queued['id']}/reapply/")
    assert response.status_code == 409 and _status_fields(response) == ["change"]
    ChangeRequest.objects.filter(pk=queued["id"]).update(state="conflict")
    response = api.post(f"/api/v1/changes/{queued['id']}/reapply/")
    assert response.status_code == 202 and response.json()["id"] != queued["id"]
    assert api.post("/api/v1/changes/999999/reapply/").status_code == 404


def test_listing_bulk_requests_costs_the_same_queries_for_one_or_many(
    api: APIClient,
    fleet: Any,
    django_assert_max_num_queries: Any,
) -> None:
    for team in ("a", "b", "c", "d"):
        Namespace.objects.create(name=f"bulk-{team}", labels={"bulk": team})
        api.post("/api/v1/bulk/", {"action": "offload", "namespaceSelector": f"bulk={team}", "spec": {}}, format="json")
    # as before, plus one query for the refused children of every bulk on the page (a prefetch, not one each)
    with django_assert_max_num_queries(5):
        results = api.get("/api/v1/bulk/").json()["results"]
    assert len(results) == 4 and all(r["progress"]["queued"] == 1 and r["progress"]["total"] == 1 for r in results)


def test_selector_lines_are_checked_as_drf_checks_text(api: APIClient, fleet: Any) -> None:
    from rest_framework import serializers

    from offloading.api.serializers import SelectorLineField

    drf = serializers.ListField(child=serializers.CharField(allow_blank=True))
    ours = serializers.ListField(child=SelectorLineField(allow_blank=True))
    cases = [
        ["region=eu", " tier ", ""],
        ["a" * 3000 + "\ud800" + "\udfff"],  # the first surrogate is named
        ["x", "k=\udc80v", "\udbff"],
        ["nul\x00byte"],
        ["x" * 100_000],
        [5, None],
    ]
    for case in cases:
        try:
            expected: Any = drf.run_validation(case)
        except serializers.ValidationError as exc:
            expected = exc.detail
        try:
            got: Any = ours.run_validation(case)
        except serializers.ValidationError as exc:
            got = exc.detail
        assert got == expected, case
    body = '{"selectors": ["ok", "a=\\ud83d"]}'  # JSON escapes: a client cannot send a lone surrogate as UTF-8
    response = api.post("/api/v1/namespaces/payments/preview/", body, content_type="application/json")
    assert response.status_code == 200 and response.json()["errors"] == {
        "selectors": {"1": ["Surrogate characters are not allowed: U+D83D."]}
    }
