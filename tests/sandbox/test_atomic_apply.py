"""Server-side apply of an atomic map (issue 27, item 9): Liqo's CRD marks NamespaceOffloading's
`spec.clusterSelector` `x-kubernetes-map-type: atomic`, so kube-apiserver (structured-merge-diff) owns it
as one field: managedFields list `f:clusterSelector` itself, not its children; another manager applying a
different selector conflicts (409 naming the field and the manager) unless it forces, which takes the
whole field; a manager that stops applying it removes it when it was the only owner. Driven through the
official Python client and through kubectl over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from tests.sandbox.conftest import GROUP, NSOFF, VERSION, Clients, expr, selector
from tests.sandbox.test_kubectl import Kubectl, kubectl  # noqa: F401 - the kubectl fixture

APPLY = "application/apply-patch+yaml"
MILAN = selector([expr("liqo.io/remote-cluster-id", "In", "milan")])
FLORENCE = selector([expr("liqo.io/remote-cluster-id", "In", "florence")])


def _manifest(cluster_selector: dict[str, Any] | None, namespace: str = "alpha") -> dict[str, Any]:
    spec: dict[str, Any] = {"podOffloadingStrategy": "LocalAndRemote"}
    if cluster_selector is not None:
        spec["clusterSelector"] = cluster_selector
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": namespace},
        "spec": spec,
    }


def _apply(kube: Clients, body: dict[str, Any], manager: str, force: bool = False) -> dict[str, Any]:
    """Apply `body` as `manager`: the object the API server answered (the client gives None for a 201,
    when the apply created it: then as read back)."""
    answered = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "offloading", body, field_manager=manager, force=force, _content_type=APPLY
    )
    return answered if answered is not None else kube.get_nsoff("alpha")


def _spec_fields(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """manager -> its fieldsV1 under f:spec (main resource only)."""
    return {
        m["manager"]: m["fieldsV1"].get("f:spec", {})
        for m in obj["metadata"].get("managedFields") or []
        if m.get("subresource", "") == ""
    }


def test_the_selector_is_owned_conflicts_and_is_forced_as_one_field(kube: Clients) -> None:
    created = _apply(kube, _manifest(MILAN), "alice")
    assert _spec_fields(created)["alice"] == {"f:clusterSelector": {}, "f:podOffloadingStrategy": {}}

    with pytest.raises(ApiException) as caught:
        _apply(kube, _manifest(FLORENCE), "bob")
    status = json.loads(caught.value.body)
    assert caught.value.status == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        f'Apply failed with 1 conflict: conflict with "alice" using {GROUP}/{VERSION}: .spec.clusterSelector'
    )
    assert [c["field"] for c in status["details"]["causes"]] == [".spec.clusterSelector"]
    assert kube.get_nsoff("alpha")["spec"]["clusterSelector"] == MILAN

    forced = _apply(kube, _manifest(FLORENCE), "bob", force=True)
    assert forced["spec"]["clusterSelector"] == FLORENCE
    owners = _spec_fields(forced)
    assert owners["bob"] == {"f:clusterSelector": {}, "f:podOffloadingStrategy": {}}
    assert owners["alice"] == {"f:podOffloadingStrategy": {}}  # the same value: still shared

    # bob stops applying the selector: he was its only owner, so it goes
    dropped = _apply(kube, _manifest(None), "bob")
    assert "clusterSelector" not in dropped["spec"]
    assert "f:clusterSelector" not in _spec_fields(dropped)["bob"]
    kube.sb.wait_idle(10)
    assert kube.get_nsoff("alpha")["status"]["offloadingPhase"] == "Ready"  # no selector: every peer


def test_a_shared_selector_stays_while_another_manager_applies_it(kube: Clients) -> None:
    _apply(kube, _manifest(MILAN), "alice")
    shared = _apply(kube, _manifest(MILAN), "bob")  # the same value: no conflict, both own it
    owners = _spec_fields(shared)
    assert "f:clusterSelector" in owners["alice"] and "f:clusterSelector" in owners["bob"]
    kept = _apply(kube, _manifest(None), "bob")
    assert kept["spec"]["clusterSelector"] == MILAN
    assert "f:clusterSelector" in _spec_fields(kept)["alice"]


def test_an_update_takes_the_whole_selector_and_an_apply_then_conflicts_with_it(kube: Clients) -> None:
    _apply(kube, _manifest(MILAN), "alice")
    patched = kube.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "alpha",
        NSOFF,
        "offloading",
        {"spec": {"clusterSelector": FLORENCE}},
        field_manager="dashboard",
    )
    owners = _spec_fields(patched)
    assert owners["dashboard"] == {"f:clusterSelector": {}}
    assert owners["alice"] == {"f:podOffloadingStrategy": {}}
    with pytest.raises(ApiException) as caught:
        _apply(kube, _manifest(MILAN), "alice")
    assert caught.value.status == 409
    assert 'conflict with "dashboard"' in json.loads(caught.value.body)["message"]


def test_kubectl_server_side_apply_owns_the_selector_as_one_field(kubectl: Kubectl, kube: Clients) -> None:  # noqa: F811
    def apply(cluster_selector: dict[str, Any] | None, manager: str, *flags: str) -> Any:
        manifest = yaml.safe_dump(_manifest(cluster_selector))
        return kubectl(
            "apply", "--server-side", f"--field-manager={manager}", *flags, "-f", "-", stdin=manifest, check=False
        )

    assert "serverside-applied" in apply(MILAN, "alice").stdout
    refused = apply(FLORENCE, "bob")
    assert refused.returncode != 0
    assert 'conflict with "alice"' in refused.stderr and ".spec.clusterSelector" in refused.stderr
    assert kube.get_nsoff("alpha")["spec"]["clusterSelector"] == MILAN

    assert "serverside-applied" in apply(FLORENCE, "bob", "--force-conflicts").stdout
    shown = kubectl("get", "nsoff", "-n", "alpha", "offloading", "-o", "json", "--show-managed-fields").stdout
    obj = json.loads(shown)
    assert obj["spec"]["clusterSelector"] == FLORENCE
    assert _spec_fields(obj)["bob"]["f:clusterSelector"] == {}
    assert "f:clusterSelector" not in _spec_fields(obj)["alice"]

    assert "serverside-applied" in apply(None, "bob").stdout
    selector_now = kubectl("get", "nsoff", "-n", "alpha", "offloading", "-o", "jsonpath={.spec.clusterSelector}")
    assert selector_now.stdout == ""


def test_an_atomic_struct_is_replaced_whole_not_merged_key_by_key(kube: Clients) -> None:
    """VirtualNode's `spec.vkOptionsTemplateRef` (an ObjectReference) is atomic too: a forced apply of
    another reference replaces it, it does not keep the keys the previous owner set."""

    def reference(manager: str, force: bool = False, **ref: str) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "VirtualNode",
            "metadata": {"name": "milan", "namespace": "liqo-tenant-milan"},
            "spec": {"vkOptionsTemplateRef": ref},
        }
        obj: dict[str, Any] = kube.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "liqo-tenant-milan",
            "virtualnodes",
            "milan",
            body,
            field_manager=manager,
            force=force,
            _content_type=APPLY,
        )
        return obj

    reference("alice", name="default", namespace="liqo")
    with pytest.raises(ApiException) as caught:
        reference("bob", name="large")
    assert ".spec.vkOptionsTemplateRef" in json.loads(caught.value.body)["message"]
    forced = reference("bob", force=True, name="large")
    assert forced["spec"]["vkOptionsTemplateRef"] == {"name": "large"}
    owners = _spec_fields(forced)
    assert owners["bob"] == {"f:vkOptionsTemplateRef": {}}
    assert "alice" not in owners  # she owned nothing else: her entry is gone
