"""An edit that changes nothing is refused by the request contract, the same way everywhere: the form
says "nothing to change", the API answers 409 with a Status, bulk leaves such a namespace out with that
reason (and still changes the others); nothing is recorded for it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from liqo_rules import constants as liqo
from offloading.changes.bulk import plan_bulk, request_bulk
from offloading.changes.checks import NothingToChange
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.requests import ChangeInput, build_change
from offloading.choices import ChangeAction, Source
from offloading.context import Actor
from offloading.models import AuditEvent, ChangeRequest, Namespace
from tests.fixtures.snapshot import READY_SPEC

pytestmark = pytest.mark.django_db

EDIT = reverse("offloading:namespace_offload", args=["shop"])
SYSTEM = Actor(None, "", Source.API, "")


@pytest.fixture
def api(admin_user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    return client


@pytest.fixture
def no_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    from offloading.changes import requests as change_requests

    monkeypatch.setattr(change_requests, "enqueue_apply", lambda change_id, countdown=0: None)


def _nothing_recorded() -> None:
    assert not ChangeRequest.objects.exists()
    assert not AuditEvent.objects.filter(action="requested").exists()


def test_the_contract_refuses_a_spec_the_namespace_already_has(fleet: Any) -> None:
    shop = Namespace.objects.get(name="shop")
    # Written another way: defaults left out, the selector as `in (...)`; the same spec once normalized.
    same = {
        "namespaceMappingStrategy": "EnforceSameName",
        "clusterSelector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west"]}
                    ]
                }
            ]
        },
    }
    with pytest.raises(NothingToChange) as refused:
        build_change(shop, ChangeInput("shop", ChangeAction.OFFLOAD, same, 3), SYSTEM)
    assert refused.value.refusal is Refusal.CONFLICT
    assert refused.value.messages[0].startswith("nothing to change")
    # The scheduling label the namespace lacks is a change; one it has is not.
    assert build_change(shop, ChangeInput("shop", ChangeAction.OFFLOAD, same, 3, label_namespace=True), SYSTEM)
    shop.labels = {liqo.SCHEDULING_LABEL: "true"}
    with pytest.raises(NothingToChange):
        build_change(shop, ChangeInput("shop", ChangeAction.OFFLOAD, same, 3, label_namespace=True), SYSTEM)
    # A real change still goes through, and a stale one is still STALE first.
    changed = build_change(
        shop, ChangeInput("shop", ChangeAction.OFFLOAD, {**same, "podOffloadingStrategy": "Local"}, 3), SYSTEM
    )
    assert (changed.desired_spec or {})["podOffloadingStrategy"] == "Local"
    with pytest.raises(ChangeRejected) as stale:
        build_change(shop, ChangeInput("shop", ChangeAction.OFFLOAD, same, 2), SYSTEM)
    assert stale.value.refusal is Refusal.STALE


def test_the_form_says_nothing_to_change(admin_client: Any, fleet: Any, no_queue: None) -> None:
    loaded = {
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": "topology.kubernetes.io/region in (eu-west)",
        "expected_generation": "3",
        "base_spec": json.dumps(READY_SPEC),
    }
    response = admin_client.post(EDIT, loaded)
    assert response.status_code == 200
    errors = " ".join(response.context["form"].non_field_errors())
    assert "nothing to change" in errors
    assert "nothing to change" in response.content.decode()
    _nothing_recorded()
    # Back after a submit, then Apply again: once the first one is applied, the second changes nothing.
    remote = {**loaded, "pod_offloading_strategy": "Remote", "confirm": "on"}  # stricter: confirmed
    assert admin_client.post(EDIT, remote).status_code == 302
    Namespace.objects.filter(name="shop").update(
        offloading_spec={**READY_SPEC, "podOffloadingStrategy": "Remote"}, offloading_generation=4
    )
    again = admin_client.post(EDIT, remote)  # the page as it was before the first Apply
    assert "nothing to change" in again.context["form"].stale_message
    once_more = admin_client.post(EDIT, {**remote, "expected_generation": "4"})
    assert "nothing to change" in " ".join(once_more.context["form"].non_field_errors())
    assert ChangeRequest.objects.count() == 1


def test_the_api_answers_409_nothing_to_change(api: APIClient, fleet: Any) -> None:
    response = api.put("/api/v1/namespaces/shop/offloading/", {}, format="json", HTTP_IF_MATCH='"3"')
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "Conflict" and body["code"] == 409
    assert body["message"].startswith("nothing to change")
    _nothing_recorded()
    response = api.put(
        "/api/v1/namespaces/shop/offloading/", {"selectors": ["topology.kubernetes.io/region=eu-west"]}, format="json"
    )
    assert response.status_code == 409
    response = api.put("/api/v1/namespaces/shop/offloading/", {"labelNamespace": True}, format="json")
    assert response.status_code == 202, "labelling the namespace is a change"


def test_the_schema_says_a_409_can_be_nothing_to_change(api: APIClient) -> None:
    schema = api.get("/api/schema/", {"format": "json"}).json()
    put = schema["paths"]["/api/v1/namespaces/{name}/offloading/"]["put"]
    assert "nothing to change" in put["responses"]["409"]["description"]


def test_bulk_leaves_a_namespace_that_would_not_change_out(fleet: Any, no_queue: None) -> None:
    Namespace.objects.filter(name__in=["shop", "payments"]).update(labels={"team": "pay"})
    plan = plan_bulk(ChangeAction.OFFLOAD, "team=pay", READY_SPEC, SYSTEM)
    assert plan.namespaces == ["payments"]
    assert plan.skipped == [{"namespace": "shop", "reason": "nothing to change", "why": "noop"}]
    bulk = request_bulk(ChangeAction.OFFLOAD, "team=pay", READY_SPEC, SYSTEM)
    assert [c.namespace for c in bulk.changes.all()] == ["payments"]
    assert bulk.skipped[0]["reason"] == "nothing to change"


def test_bulk_dry_run_in_the_api_reports_the_skip(api: APIClient, fleet: Any) -> None:
    Namespace.objects.filter(name__in=["shop", "payments"]).update(labels={"team": "pay"})
    body = {"action": "offload", "namespaceSelector": "team=pay", "spec": READY_SPEC, "dryRun": True}
    dry = api.post("/api/v1/bulk/", body, format="json")
    assert dry.status_code == 200
    assert dry.json()["namespaces"] == ["payments"]
    assert {"namespace": "shop", "reason": "nothing to change", "why": "noop"} in dry.json()["skipped"]
