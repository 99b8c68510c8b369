"""One request contract: the form, the REST API and bulk give the same answer for the same stale edit
and for the same refusal by Liqo's webhook, and none of them records a change for it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from liqo_rules import constants as liqo
from offloading.models import AuditEvent, ChangeRequest, Namespace
from offloading.snapshot.refresh import refresh

pytestmark = pytest.mark.django_db(transaction=True)

GROUP, VERSION, PLURAL = "offloading.liqo.io", "v1beta1", "namespaceoffloadings"
INTERNAL = re.compile(r"ChangeRejected|Refusal|Traceback|cluster_selector|namespace_selector|offloading\.changes")


@pytest.fixture
def api(admin_user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    return client


@pytest.fixture
def dry_runs(settings: Any) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "DRY_RUN_ON_SUBMIT": True}


def _nothing_recorded() -> None:
    assert not ChangeRequest.objects.exists()
    assert not AuditEvent.objects.filter(action="requested").exists()


def _form_errors(html: str) -> str:
    """The error texts a page shows (the form's error elements and banners)."""
    found = re.findall(r'<(?:small class="error"|div class="banner bad")[^>]*>(.*?)</(?:small|div)>', html, re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", f) for f in found)


def _offloaded_namespace(k8s: Any, name: str) -> Namespace:
    """A namespace offloaded in the sandbox (DefaultName), known to the snapshot."""
    k8s.core.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"c": name}}}
    )
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        name,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {},
        },
    )
    # A second write of the spec: generation 2, so an edit based on generation 1 is stale.
    k8s.custom.patch_namespaced_custom_object(
        GROUP, VERSION, name, PLURAL, "offloading", {"spec": {"podOffloadingStrategy": "Local"}}
    )
    refresh()
    namespace = Namespace.objects.get(name=name)
    assert namespace.offloaded and namespace.offloading_generation == 2
    return namespace


# --------------------------------------------------------------------------------------------------
# The same stale edit


def test_a_stale_edit_gets_the_same_refusal_from_the_form_the_api_and_bulk(
    sandbox: Any, k8s: Any, admin_client: Any, api: APIClient
) -> None:
    namespace = _offloaded_namespace(k8s, "stale")
    seen = namespace.offloading_generation - 1  # what a requester who loaded the page earlier saw
    expected_message = f"changed after you loaded it (generation {seen} is now {namespace.offloading_generation})"

    page = admin_client.post(
        reverse("offloading:namespace_offload", args=["stale"]),
        {"pod_offloading_strategy": "Remote", "cluster_selector": "", "expected_generation": seen},
    )
    assert page.status_code == 200
    assert expected_message in _form_errors(page.content.decode())

    response = api.put(
        "/api/v1/namespaces/stale/offloading/",
        {"podOffloadingStrategy": "Remote"},
        format="json",
        HTTP_IF_MATCH=f'"{seen}"',
    )
    assert response.status_code == 412
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "PreconditionFailed" and expected_message in body["message"]

    bulk_body = {
        "action": "offload",
        "namespaceSelector": "c=stale",
        "spec": {},
        "expectedGenerations": {"stale": seen},
    }
    preview = api.post("/api/v1/bulk/", {**bulk_body, "dryRun": True}, format="json")
    assert preview.status_code == 200 and preview.json()["namespaces"] == []
    assert expected_message in preview.json()["skipped"][0]["reason"]
    response = api.post("/api/v1/bulk/", bulk_body, format="json")
    assert response.status_code == 422 and expected_message in response.json()["message"]

    page = admin_client.post(
        reverse("offloading:bulk"),
        {
            "action": "offload",
            "namespace_selector": "c=stale",
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "Remote",
            "cluster_selector": "",
            "expected_generations": json.dumps({"stale": seen}),
        },
    )
    assert page.status_code == 200 and expected_message in _form_errors(page.content.decode())
    _nothing_recorded()


def test_the_bulk_preview_hands_the_generations_it_showed_back_to_the_submit(
    sandbox: Any, k8s: Any, admin_client: Any
) -> None:
    namespace = _offloaded_namespace(k8s, "shown")
    page = admin_client.post(
        reverse("offloading:bulk_preview"),
        {
            "action": "unoffload",
            "namespace_selector": "c=shown",
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "LocalAndRemote",
        },
    ).content.decode()
    hidden = re.search(r'name="expected_generations" form="bulk-form" value="([^"]*)"', page)
    assert hidden is not None
    assert json.loads(hidden.group(1).replace("&quot;", '"')) == {"shown": namespace.offloading_generation}


# --------------------------------------------------------------------------------------------------
# The same refusal by Liqo's webhook


def _kubectl_offloaded_behind_the_snapshot(k8s: Any, name: str) -> None:
    """The namespace is offloaded in the cluster with EnforceSameName, and the snapshot has not seen it:
    an offload with DefaultName passes our checks, and only the API server (Liqo's webhook, which
    refuses to change the mapping strategy) can say no."""
    k8s.core.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"c": name}}}
    )
    refresh()
    assert not Namespace.objects.get(name=name).offloaded
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        name,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {"namespaceMappingStrategy": "EnforceSameName"},
        },
    )


def test_a_webhook_denial_is_a_field_error_a_422_and_a_skipped_namespace(
    sandbox: Any, k8s: Any, admin_client: Any, api: APIClient, dry_runs: None, settings: Any
) -> None:
    # A bulk asks the cluster before recording only with BULK_CHECKS=request (by default its pushes are
    # the checks: tests/access/test_cluster_decides.py); a single change always asks first.
    settings.LIQO_DASH = {**settings.LIQO_DASH, "BULK_CHECKS": "request"}
    _kubectl_offloaded_behind_the_snapshot(k8s, "denied")
    webhook_says = liqo.WEBHOOK_MAPPING_IMMUTABLE_MESSAGE

    page = admin_client.post(
        reverse("offloading:namespace_offload", args=["denied"]),
        {
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "LocalAndRemote",
            "cluster_selector": "",
            "expected_generation": 0,
        },
    ).content.decode()
    field = re.search(r'id="id_namespace_mapping_strategy".*?</select>(.*?)(?:<label|</fieldset)', page, re.S)
    assert field is not None and webhook_says in field.group(1), "the refusal is on the mapping field"

    response = api.put(
        "/api/v1/namespaces/denied/offloading/", {"namespaceMappingStrategy": "DefaultName"}, format="json"
    )
    assert response.status_code == 422
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.namespaceMappingStrategy"]
    assert webhook_says in body["details"]["causes"][0]["message"]

    bulk_body = {"action": "offload", "namespaceSelector": "c=denied", "spec": {}}
    preview = api.post("/api/v1/bulk/", {**bulk_body, "dryRun": True}, format="json").json()
    assert preview["namespaces"] == [] and webhook_says in preview["skipped"][0]["reason"]
    response = api.post("/api/v1/bulk/", bulk_body, format="json")
    assert response.status_code == 422 and webhook_says in response.json()["message"]

    page = admin_client.post(
        reverse("offloading:bulk"),
        {
            "action": "offload",
            "namespace_selector": "c=denied",
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "LocalAndRemote",
            "cluster_selector": "",
        },
    ).content.decode()
    assert webhook_says in _form_errors(page)
    _nothing_recorded()
    assert not ChangeRequest.objects.filter(state="failed").exists()


def test_a_refusal_by_our_copy_of_the_webhook_rules_reads_the_same_everywhere(
    sandbox: Any, k8s: Any, admin_client: Any, api: APIClient
) -> None:
    k8s.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "named"}})
    refresh()
    page = admin_client.post(
        reverse("offloading:namespace_offload", args=["named"]),
        {
            "namespace_mapping_strategy": "SelectedName",
            "pod_offloading_strategy": "LocalAndRemote",
            "cluster_selector": "",
            "expected_generation": 0,
        },
    ).content.decode()
    response = api.put(
        "/api/v1/namespaces/named/offloading/", {"namespaceMappingStrategy": "SelectedName"}, format="json"
    )
    assert response.status_code == 422
    message = response.json()["details"]["causes"][0]["message"]
    assert response.json()["details"]["causes"][0]["field"] == "spec.remoteNamespaceName"
    assert message in page
    for text in (page, json.dumps(response.json())):
        assert not INTERNAL.search(_form_errors(text) if text is page else text)
    _nothing_recorded()


def test_previews_name_fields_by_their_labels_not_their_internal_names(admin_client: Any) -> None:
    page = admin_client.post(reverse("offloading:bulk_preview"), {"action": "offload"}).content.decode()
    errors = _form_errors(page)
    assert "Namespace selector" in errors
    assert not re.search(r"namespace_?selector|namespaceselector", errors)
