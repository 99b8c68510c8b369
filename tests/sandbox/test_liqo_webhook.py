"""The NamespaceOffloading validating webhook and CRD validation, as the API server applies them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.sandbox.conftest import GROUP, NSOFF, VERSION, Clients


def denial(exc: pytest.ExceptionInfo[ApiException]) -> tuple[int, str]:
    body = json.loads(exc.value.body)
    return exc.value.status, body["message"]


def replace(kube: Clients, namespace: str, change: dict[str, Any]) -> dict[str, Any]:
    kube.sb.wait_idle(10)
    obj = kube.get_nsoff(namespace)
    obj["spec"].update(change)
    return kube.custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, NSOFF, "offloading", obj)


def test_the_name_must_be_offloading(kube: Clients) -> None:
    with pytest.raises(ApiException) as exc:
        kube.create_nsoff("alpha", name="my-offloading")
    assert denial(exc) == (
        403,
        'admission webhook "nsoff.validate.liqo.io" denied the request: NamespaceOffloading name must match offloading',
    )
    assert json.loads(exc.value.body)["reason"] == "Forbidden"


def test_selected_name_needs_a_remote_namespace_name(kube: Clients) -> None:
    with pytest.raises(ApiException) as exc:
        kube.create_nsoff("alpha", {"namespaceMappingStrategy": "SelectedName"})
    assert denial(exc)[1].endswith(
        "The RemoteNamespaceName value cannot be empty when using the SelectedName NamespaceMappingStrategy"
    )
    created = kube.create_nsoff("alpha", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "there"})
    assert created["spec"]["remoteNamespaceName"] == "there"


def test_mapping_strategy_and_remote_name_are_immutable(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"namespaceMappingStrategy": "EnforceSameName"})
    with pytest.raises(ApiException) as exc:
        replace(kube, "alpha", {"namespaceMappingStrategy": "DefaultName"})
    assert denial(exc)[1].endswith("The NamespaceMappingStrategy value cannot be modified after creation")
    with pytest.raises(ApiException) as exc:
        replace(kube, "alpha", {"remoteNamespaceName": "elsewhere"})
    assert denial(exc)[1].endswith("The RemoteNamespaceName value cannot be modified after creation")
    # a PUT that omits the strategy is defaulted to DefaultName, hence denied (liqo-semantics a.2)
    kube.sb.wait_idle(10)
    obj = kube.get_nsoff("alpha")
    del obj["spec"]["namespaceMappingStrategy"]
    with pytest.raises(ApiException) as exc:
        kube.custom.replace_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "offloading", obj)
    assert exc.value.status == 403


def test_a_more_restrictive_pod_strategy_is_allowed_with_a_warning(kube: Clients) -> None:
    kube.create_nsoff("alpha")
    kube.sb.wait_idle(10)
    obj = kube.get_nsoff("alpha")
    obj["spec"]["podOffloadingStrategy"] = "Local"
    _, _, headers = kube.custom.replace_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "alpha", NSOFF, "offloading", obj
    )
    assert "more restrictive setting" in headers["Warning"]
    kube.sb.wait_idle(10)
    back = kube.get_nsoff("alpha")
    back["spec"]["podOffloadingStrategy"] = "LocalAndRemote"
    _, _, headers = kube.custom.replace_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "alpha", NSOFF, "offloading", back
    )
    assert "Warning" not in headers


def test_the_webhook_skip_label_bypasses_the_webhook(kube: Clients) -> None:
    created = kube.create_nsoff("alpha", name="whatever", labels={"liqo.io/webhook-skip": "true"})
    assert created["metadata"]["name"] == "whatever"
    kube.sb.wait_idle(10)
    assert "status" not in kube.get_nsoff("alpha", "whatever")  # the controller ignores other names


def test_crd_schema_defaults_and_enums(kube: Clients) -> None:
    created = kube.create_nsoff("alpha", {})
    assert created["spec"]["namespaceMappingStrategy"] == "DefaultName"
    assert created["spec"]["podOffloadingStrategy"] == "LocalAndRemote"
    with pytest.raises(ApiException) as exc:
        kube.create_nsoff("beta", {"podOffloadingStrategy": "Sometimes"})
    body = json.loads(exc.value.body)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'NamespaceOffloading.offloading.liqo.io "offloading" is invalid: '
        'spec.podOffloadingStrategy: Unsupported value: "Sometimes": supported values: '
        '"Local", "Remote", "LocalAndRemote"'
    )
    assert body["details"]["causes"][0]["field"] == "spec.podOffloadingStrategy"
    with pytest.raises(ApiException) as exc:
        kube.create_nsoff("beta", {"clusterSelector": {}})
    assert exc.value.status == 422 and "nodeSelectorTerms: Required value" in json.loads(exc.value.body)["message"]
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading", "metadata": {"name": "offloading"}}
    with pytest.raises(ApiException) as exc:
        kube.custom.create_namespaced_custom_object(GROUP, VERSION, "beta", NSOFF, body)
    assert exc.value.status == 422 and "spec: Required value" in json.loads(exc.value.body)["message"]
