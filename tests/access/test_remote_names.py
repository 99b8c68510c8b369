"""Scopes cover where a namespace goes, and two namespaces never share a remote name on one peer.

An operator scoped to ``checkout-*`` could offload ``checkout-a`` with ``SelectedName`` ``kube-system``
(or another team's name) on every peer; two local namespaces could map to the same remote name on the
same peer: real Liqo then puts both into one remote namespace (no error), which unoffloading either
deletes for both.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from offloading.choices import AuditAction
from offloading.models import AuditEvent, ChangeRequest, ClusterOffloading, Namespace

pytestmark = pytest.mark.django_db

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


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _selected_name(remote: str, selector: dict[str, Any] = WEST) -> dict[str, Any]:
    return {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": remote, "clusterSelector": selector}


@pytest.fixture
def checkout(fleet: Any, make_user: Any) -> APIClient:
    for name, labels in (("checkout-a", {}), ("checkout-b", {}), ("billing", {"team": "billing"})):
        Namespace.objects.create(name=name, labels=labels)
    return _client(make_user("olga", "operator", globs=["checkout-*"]))


@pytest.mark.parametrize("remote", ["kube-system", "billing", "payments"])
def test_an_operator_cannot_send_a_namespace_under_a_name_outside_their_scopes(
    checkout: APIClient, remote: str
) -> None:
    response = checkout.put("/api/v1/namespaces/checkout-a/offloading/", _selected_name(remote), format="json")
    assert response.status_code == 403, response.content
    status = response.json()
    assert status["kind"] == "Status" and status["reason"] == "Forbidden", status
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert f'"{remote}" is not in your scopes' in causes["spec.remoteNamespaceName"]
    assert "checkout-*" in causes["spec.remoteNamespaceName"]
    assert not ChangeRequest.objects.exists()
    assert AuditEvent.objects.filter(namespace="checkout-a", action=AuditAction.REFUSED).exists()


def test_a_remote_name_inside_the_scopes_is_accepted(checkout: APIClient) -> None:
    response = checkout.put("/api/v1/namespaces/checkout-a/offloading/", _selected_name("checkout-b"), format="json")
    assert response.status_code in (201, 202), response.content
    assert ChangeRequest.objects.get().desired_spec["remoteNamespaceName"] == "checkout-b"


def test_label_scopes_are_read_on_the_local_namespace_of_that_name(fleet: Any, make_user: Any) -> None:
    Namespace.objects.create(name="pay-a", labels={"team": "pay"})
    Namespace.objects.create(name="pay-b", labels={"team": "pay"})
    client = _client(make_user("paula", "operator", selectors=["team=pay"]))
    ok = client.put("/api/v1/namespaces/pay-a/offloading/", _selected_name("pay-b", SOUTH), format="json")
    assert ok.status_code in (201, 202), ok.content
    refused = client.put("/api/v1/namespaces/pay-b/offloading/", _selected_name("elsewhere", SOUTH), format="json")
    assert refused.status_code == 403


def test_admins_choose_any_remote_name(fleet: Any, admin_user: Any) -> None:
    Namespace.objects.create(name="checkout-a")
    response = _client(admin_user).put(
        "/api/v1/namespaces/checkout-a/offloading/", _selected_name("anything", SOUTH), format="json"
    )
    assert response.status_code in (201, 202), response.content


def test_two_namespaces_mapping_to_one_remote_name_on_one_peer_are_refused_naming_the_other(
    fleet: Any,
    admin_user: Any,
) -> None:
    client = _client(admin_user)
    # shop (EnforceSameName) holds the remote namespace "shop" on milan.
    preview = client.post("/api/v1/namespaces/payments/preview/", _selected_name("shop"), format="json").json()
    assert preview["remoteNameCollisions"] == [
        {"namespace": "shop", "clusters": ["milan"], "message": preview["remoteNameCollisions"][0]["message"]}
    ]
    assert "unoffloading either would delete it for both" in preview["remoteNameCollisions"][0]["message"]
    response = client.put("/api/v1/namespaces/payments/offloading/", _selected_name("shop"), format="json")
    assert response.status_code == 409, response.content
    causes = {c["field"]: c["message"] for c in response.json()["details"]["causes"]}
    assert 'Namespace "shop" already maps to the remote namespace "shop" on milan' in causes["spec.remoteNamespaceName"]
    assert not ChangeRequest.objects.exists()
    # On naples shop is not selected and holds nothing: the same name is free there.
    south = client.post("/api/v1/namespaces/payments/preview/", _selected_name("shop", SOUTH), format="json").json()
    assert south["remoteNameCollisions"] == []
    accepted = client.put("/api/v1/namespaces/payments/offloading/", _selected_name("shop", SOUTH), format="json")
    assert accepted.status_code in (201, 202), accepted.content


def test_a_peer_that_still_holds_the_remote_namespace_counts(fleet: Any, admin_user: Any) -> None:
    # shop was de-selected on naples but Liqo is still deleting its remote namespace there.
    ClusterOffloading.objects.filter(namespace__name="shop", cluster_id="naples").update(state="Terminating")
    preview = (
        _client(admin_user)
        .post("/api/v1/namespaces/payments/preview/", _selected_name("shop", SOUTH), format="json")
        .json()
    )
    assert [c["clusters"] for c in preview["remoteNameCollisions"]] == [["naples"]]


def test_default_names_collide_with_a_selected_name_too(fleet: Any, admin_user: Any) -> None:
    # DefaultName gives <namespace>-<local cluster id>: payments-rome.
    shop = Namespace.objects.get(name="shop")
    shop.remote_namespace_name = "payments-rome"
    shop.save()
    response = _client(admin_user).put(
        "/api/v1/namespaces/payments/offloading/",
        {"namespaceMappingStrategy": "DefaultName", "clusterSelector": WEST},
        format="json",
    )
    assert response.status_code == 409
    causes = {c["field"]: c["message"] for c in response.json()["details"]["causes"]}
    assert "payments-rome" in causes["spec.namespaceMappingStrategy"]


def test_the_offload_page_preview_warns_of_a_collision(fleet: Any, admin_client: Any) -> None:
    data = {
        "namespace_mapping_strategy": "SelectedName",
        "remote_namespace_name": "shop",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": "topology.kubernetes.io/region=eu-west",
        "expected_generation": 0,
    }
    page = admin_client.post("/namespaces/payments/offload/preview/", data, HTTP_HX_REQUEST="true")
    assert page.status_code == 200
    assert b"data-collision" in page.content and b"already maps to the remote namespace" in page.content


def test_a_bulk_leaves_out_the_namespace_whose_default_name_another_one_uses(fleet: Any, admin_user: Any) -> None:
    """A bulk checks every target against one index of the offloaded namespaces' remote names: the
    same refusal as a single change, for the colliding namespace only."""
    shop = Namespace.objects.get(name="shop")
    shop.remote_namespace_name = "payments-rome"  # what DefaultName gives payments here
    shop.save()
    Namespace.objects.filter(name="payments").update(labels={"bulk": "collide"})
    Namespace.objects.create(name="search", labels={"bulk": "collide"})
    response = _client(admin_user).post(
        "/api/v1/bulk/",
        {
            "action": "offload",
            "namespaceSelector": "bulk=collide",
            "spec": {"namespaceMappingStrategy": "DefaultName", "clusterSelector": WEST},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert [s["namespace"] for s in body["skipped"]] == ["payments"]
    assert 'already maps to the remote namespace "payments-rome" on milan' in body["skipped"][0]["reason"]
    assert list(ChangeRequest.objects.values_list("namespace", flat=True)) == ["search"]
