"""One destructive-change rule (offloading.whatif.destructive): the table of its cases, and every entry
point (the offload/edit and unoffload pages, the REST API, bulk, re-apply, re-apply mine, bulk retry)
refuses a destructive change without confirmation and takes it with it."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from liqo_rules.spec import normalize_spec
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, ClusterOffloading, Namespace
from offloading.whatif.destructive import destructive_reason, is_destructive

WEST = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west"]}]}
    ]
}
SOUTH = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south"]}]}
    ]
}
BOTH = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west", "eu-south"]}
            ]
        }
    ]
}
REGIONS = {"milan": "eu-west", "naples": "eu-south", **{f"peer-{i}": "eu-west" for i in range(8)}}


def _selects(selector: Any) -> set[str]:
    terms = (selector or {}).get("nodeSelectorTerms") or []
    if not terms:
        return set(REGIONS)
    wanted = {v for term in terms for e in term["matchExpressions"] for v in e["values"]}
    return {cluster for cluster, region in REGIONS.items() if region in wanted}


def _spec(selector: Any = WEST, pod: str | None = "LocalAndRemote") -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": selector}
    if pod is not None:
        spec["podOffloadingStrategy"] = pod
    return spec


UPDATE, UNOFFLOAD = ChangeAction.UPDATE, ChangeAction.UNOFFLOAD

# (case, action, before, after, on now, a text the reason holds; None: not destructive)
CASES: list[tuple[str, str, Any, Any, set[str], str | None]] = [
    ("a new offloading", ChangeAction.OFFLOAD, None, _spec(), set(), None),
    ("unoffload", UNOFFLOAD, _spec(), None, {"milan"}, "unoffloading shop deletes its twin namespace on milan"),
    ("unoffload, no peer reported", UNOFFLOAD, _spec(), None, set(), "on every peer it reaches"),
    ("the same spec", UPDATE, _spec(), _spec(), {"milan"}, None),
    ("the same spec, written otherwise", UPDATE, _spec(pod=None), normalize_spec(_spec()), {"milan"}, None),
    ("a selector that loses milan", UPDATE, _spec(), _spec(SOUTH), {"milan"}, "no longer selects milan"),
    ("a selector that only gains", UPDATE, _spec(), _spec(BOTH), {"milan"}, None),
    ("every cluster", UPDATE, _spec(), _spec({"nodeSelectorTerms": []}), {"milan"}, None),
    ("loses a cluster it is not on", UPDATE, _spec(BOTH), _spec(WEST), {"milan"}, None),
    ("unchanged selector, a stale status", UPDATE, _spec(pod="Local"), _spec(pod="LocalAndRemote"), {"naples"}, None),
    ("LocalAndRemote to Remote", UPDATE, _spec(), _spec(pod="Remote"), {"milan"}, "pods running on local nodes"),
    ("LocalAndRemote to Local", UPDATE, _spec(), _spec(pod="Local"), {"milan"}, "pods running on the peers"),
    ("Remote to Local", UPDATE, _spec(pod="Remote"), _spec(pod="Local"), {"milan"}, "from Remote to Local"),
    ("Local to Remote", UPDATE, _spec(pod="Local"), _spec(pod="Remote"), {"milan"}, "from Local to Remote"),
    ("Local to LocalAndRemote", UPDATE, _spec(pod="Local"), _spec(), {"milan"}, None),
    ("Remote to LocalAndRemote", UPDATE, _spec(pod="Remote"), _spec(), {"milan"}, None),
    ("the default strategy to Remote", UPDATE, _spec(pod=None), _spec(pod="Remote"), set(), "LocalAndRemote to Remote"),
]


@pytest.mark.parametrize(("case", "action", "before", "after", "on_now", "says"), CASES, ids=[c[0] for c in CASES])
def test_the_rule(case: str, action: str, before: Any, after: Any, on_now: set[str], says: str | None) -> None:
    why = destructive_reason("shop", action, before, after, on_now, _selects)
    if says is None:
        assert why is None, why
    else:
        assert why is not None and says in why, why


def test_a_selector_that_loses_a_cluster_and_a_stricter_strategy_say_both() -> None:
    why = destructive_reason("shop", UPDATE, _spec(), _spec(SOUTH, "Remote"), {"milan"}, _selects)
    assert why is not None and "no longer selects milan" in why and "; the pod offloading strategy" in why


def test_many_lost_clusters_are_named_up_to_five() -> None:
    on_now = {f"peer-{i}" for i in range(8)}
    why = destructive_reason("shop", UPDATE, _spec(), _spec(SOUTH), on_now, _selects)
    assert why is not None and "peer-0, peer-1, peer-2, peer-3, peer-4 and 3 more" in why


def test_is_destructive_reads_the_snapshot(fleet: Any) -> None:
    shop = fleet["shop"]
    assert "no longer selects milan" in (is_destructive(shop, UPDATE, _spec(SOUTH)) or "")
    assert is_destructive(shop, UPDATE, _spec(BOTH)) is None
    assert "on milan" in (is_destructive(shop, UNOFFLOAD, None) or "")
    assert is_destructive(fleet["plain"], ChangeAction.OFFLOAD, _spec(SOUTH)) is None


# -- the entry points ------------------------------------------------------------------------------

EDIT_FORM = {
    "pod_offloading_strategy": "LocalAndRemote",
    "cluster_selector": "topology.kubernetes.io/region in (eu-south)",
    "expected_generation": "3",
}


def test_the_edit_form_asks_for_confirmation_with_the_reason(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_offload", args=["shop"])
    preview = admin_client.post(reverse("offloading:namespace_offload_preview", args=["shop"]), EDIT_FORM)
    body = preview.content.decode()
    assert 'id="destructive-box" hx-swap-oob="true"' in body and "no longer selects milan" in body

    refused = admin_client.post(url, EDIT_FORM)
    assert refused.status_code == 200
    assert "no longer selects milan" in " ".join(refused.context["form"].errors["confirm"])
    assert 'name="confirm"' in refused.content.decode()
    assert not ChangeRequest.objects.exists()

    assert admin_client.post(url, {**EDIT_FORM, "confirm": "on"}).status_code == 302
    assert ChangeRequest.objects.get().desired_spec["clusterSelector"] == SOUTH


def test_an_edit_that_gains_clusters_is_not_asked_to_confirm(admin_client: Any, fleet: Any) -> None:
    form = {**EDIT_FORM, "cluster_selector": "topology.kubernetes.io/region in (eu-west, eu-south)"}
    assert admin_client.post(reverse("offloading:namespace_offload", args=["shop"]), form).status_code == 302


def test_the_unoffload_page_asks_for_the_typed_name_with_the_reason(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_unoffload", args=["shop"])
    page = admin_client.get(url).content.decode()
    assert "Unoffloading shop deletes its twin namespace on milan" in page
    for typed in ("", "shpo"):
        refused = admin_client.post(url, {"confirm": typed, "expected_generation": "3"})
        errors = " ".join(refused.context["form"].errors["confirm"])
        assert refused.status_code == 200 and "deletes its twin namespace on milan" in errors
        assert ("exactly to confirm" in errors) == bool(typed)
    assert not ChangeRequest.objects.exists()
    assert admin_client.post(url, {"confirm": "shop", "expected_generation": "3"}).status_code == 302
    assert ChangeRequest.objects.get().action == ChangeAction.UNOFFLOAD


def _refused_on_confirm(response: Any, says: str) -> None:
    assert response.status_code == 400, response.content
    status = response.json()
    assert status["kind"] == "Status" and status["reason"] == "BadRequest" and status["code"] == 400
    assert [c["field"] for c in status["details"]["causes"]] == ["confirm"]
    assert says in status["message"]


def test_the_api_edit_needs_confirm(api: Any, fleet: Any) -> None:
    url = "/api/v1/namespaces/shop/offloading/"
    preview = api.post("/api/v1/namespaces/shop/preview/", {"clusterSelector": SOUTH}, format="json").json()
    assert "no longer selects milan" in preview["destructive"]
    _refused_on_confirm(api.put(url, {"clusterSelector": SOUTH}, format="json"), "no longer selects milan")
    _refused_on_confirm(api.put(url, {"podOffloadingStrategy": "Remote"}, format="json"), "to Remote")
    assert not ChangeRequest.objects.exists()
    assert api.put(url, {"clusterSelector": SOUTH, "confirm": True}, format="json").status_code == 202


def test_the_api_unoffload_needs_confirm_in_the_query(api: Any, fleet: Any) -> None:
    url = "/api/v1/namespaces/shop/offloading/"
    _refused_on_confirm(api.delete(url), "deletes its twin namespace on milan")
    _refused_on_confirm(api.delete(url + "?confirm=false"), "deletes its twin namespace on milan")
    bad = api.delete(url + "?confirm=maybe")
    assert bad.status_code == 400 and bad.json()["details"]["causes"][0]["field"] == "confirm"
    assert not ChangeRequest.objects.exists()
    assert api.delete(url + "?confirm=true").status_code == 202


def test_the_api_bulk_needs_confirm(api: Any, fleet: Any) -> None:
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    body = {"action": "unoffload", "namespaceSelector": "env=prod"}
    plan = api.post("/api/v1/bulk/", {**body, "dryRun": True}, format="json").json()
    assert "destructive for 1 of the 1 namespaces (shop)" in plan["destructive"]
    _refused_on_confirm(api.post("/api/v1/bulk/", body, format="json"), "deletes its twin namespace on milan")
    assert not BulkRequest.objects.exists()
    assert api.post("/api/v1/bulk/", {**body, "confirm": True}, format="json").status_code == 201


def test_the_bulk_page_says_why_it_asks_for_the_count(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    form = {
        "action": "offload",
        "namespace_selector": "env=prod",
        "namespace_mapping_strategy": "EnforceSameName",
        "pod_offloading_strategy": "Remote",
        "cluster_selector": "topology.kubernetes.io/region in (eu-west)",
    }
    preview = admin_client.post(reverse("offloading:bulk_preview"), form).content.decode()
    assert "This change is destructive" in preview and "from LocalAndRemote to Remote" in preview
    refused = admin_client.post(reverse("offloading:bulk"), form)
    assert refused.status_code == 200 and "from LocalAndRemote to Remote" in refused.content.decode()
    assert not BulkRequest.objects.exists()
    assert admin_client.post(reverse("offloading:bulk"), {**form, "confirm_count": "1"}).status_code == 302


def _conflicted_edit_to_local() -> ChangeRequest:
    base = normalize_spec(_spec())
    return ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        base_spec=base,
        desired_spec={**base, "podOffloadingStrategy": "Local"},
        state=ChangeState.CONFLICT,
        requester_name="admin",
        source="web",
    )


def test_reapply_on_the_page_asks_for_confirmation(admin_client: Any, fleet: Any) -> None:
    conflicted = _conflicted_edit_to_local()
    url = reverse("offloading:change_reapply", args=[conflicted.pk])
    page = admin_client.post(url)
    assert page.status_code == 200 and "from LocalAndRemote to Local" in page.content.decode()
    assert 'name="confirm" value="on"' in page.content.decode()
    assert ChangeRequest.objects.count() == 1
    assert admin_client.post(url, {"confirm": "on"}).status_code == 302
    assert ChangeRequest.objects.count() == 2


def test_reapply_in_the_api_needs_confirm(api: Any, fleet: Any) -> None:
    conflicted = _conflicted_edit_to_local()
    url = f"/api/v1/changes/{conflicted.pk}/reapply/"
    _refused_on_confirm(api.post(url, {}, format="json"), "from LocalAndRemote to Local")
    assert api.post(url, {"confirm": "yes please"}, format="json").status_code == 400
    assert api.post(url, {"confirm": True}, format="json").status_code == 202


def test_reapply_mine_after_drift_asks_for_confirmation(admin_client: Any, fleet: Any) -> None:
    """Someone widened shop to both regions and it is on naples too; re-applying mine (west) loses naples."""
    ClusterOffloading.objects.filter(cluster_id="naples").update(selected=True, state="NamespaceCreated")
    mine = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        desired_spec=normalize_spec(_spec()),
        state=ChangeState.APPLIED,
        requester_name="admin",
        source="web",
    )
    Namespace.objects.filter(name="shop").update(offloading_spec=normalize_spec(_spec(BOTH)))
    AuditEvent(user_name="kubectl", source=Source.EXTERNAL, action=AuditAction.DRIFT_UPDATED, namespace="shop").save()
    url = reverse("offloading:drift_reapply", args=["shop"])
    page = admin_client.post(url)
    assert page.status_code == 200 and "no longer selects naples" in page.content.decode()
    assert ChangeRequest.objects.count() == 1
    assert admin_client.post(url, {"confirm": "on"}).status_code == 302
    assert ChangeRequest.objects.exclude(pk=mine.pk).get().desired_spec["clusterSelector"] == WEST


def test_retrying_a_failed_bulk_unoffload_asks_for_confirmation(admin_client: Any, fleet: Any) -> None:
    failed_bulk = BulkRequest.objects.create(action="unoffload", namespace_selector="env=prod", total=1)
    ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UNOFFLOAD,
        state=ChangeState.FAILED,
        requester_name="admin",
        source="bulk",
        bulk=failed_bulk,
    )
    url = reverse("offloading:bulk_retry", args=[failed_bulk.pk])
    page = admin_client.post(url)
    assert page.status_code == 200 and "deletes its twin namespace on milan" in page.content.decode()
    assert BulkRequest.objects.count() == 1
    assert admin_client.post(url, {"confirm": "on"}).status_code == 302
    assert BulkRequest.objects.count() == 2
