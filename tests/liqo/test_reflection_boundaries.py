"""Edges of liqo_rules.reflection (liqo-semantics.md f): the exact Liqo error texts, the reasons the
dashboard shows for each decision, kinds with their own rules, and inputs that must not be modified."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from liqo_rules.reflection import anti_affinity_labels, reflection_decision, remote_affinity

ALLOW = "liqo.io/allow-reflection"
SKIP = "liqo.io/skip-reflection"
BOTH = {ALLOW: "true", SKIP: "true"}
NODENAME = "offloading.liqo.io/nodename"
SVC_LABEL = {"kubernetes.io/service-name": "web"}


# --- Liqo's own error text (the virtual kubelet logs it) ----------------------------------------------


@pytest.mark.parametrize(("kind", "name"), [("endpointslice", "ns/web-abc"), ("configmap", "ns/kube-root-ca.crt")])
def test_both_annotations_is_an_error_with_liqos_message(kind: str, name: str) -> None:
    d = reflection_decision(kind, BOTH, name=name)
    want = f'object "{name}" can\'t have both the allow and deny annotations set'
    assert (d.reflected, d.reason, d.error) == (False, want, want)


def test_the_error_names_an_unnamed_object_as_empty() -> None:
    assert (
        reflection_decision("endpointslice", BOTH).error
        == 'object "" can\'t have both the allow and deny annotations set'
    )


# --- kinds with their own rules ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["persistentvolume", "PersistentVolume"])
@pytest.mark.parametrize("annotations", [{}, {ALLOW: "true"}])
def test_persistent_volumes_are_not_reflected_forward(kind: str, annotations: dict[str, str]) -> None:
    d = reflection_decision(kind, annotations, "AllowList")
    assert d.reflected is False
    assert d.reason == "persistentvolumes are only reflected back for PVCs bound through Liqo storage"
    assert d.error is None


@pytest.mark.parametrize("kind", ["pod", "serviceaccount", "persistentvolumeclaim", "pvc", "SA"])
def test_custom_liqo_kinds_ignore_the_policy(kind: str) -> None:
    d = reflection_decision(kind, {SKIP: "true"}, "AllowList")
    assert d.reflected is True
    assert d.reason.endswith("s follow Liqo's own reflection logic; the policy does not apply")


def test_a_secret_named_like_the_root_ca_configmap_follows_the_policy() -> None:
    assert reflection_decision("secret", {}, "AllowList", name="ns/kube-root-ca.crt").reflected is False
    assert reflection_decision("configmap", {}, "AllowList", name="ns/kube-root-ca.crt").reflected is True
    assert reflection_decision("configmap", {}, "AllowList", name="ns/other").reflected is False
    assert reflection_decision("configmap", {}, "AllowList", name="kube-root-ca.crt.bak").reflected is False


def test_root_ca_reasons() -> None:
    assert reflection_decision("configmap", {ALLOW: "false"}, "AllowList", name="ns/kube-root-ca.crt").reason == (
        "kube-root-ca.crt is always reflected unless explicitly annotated"
    )
    d = reflection_decision("configmap", {SKIP: "x"}, "DenyList", name="ns/kube-root-ca.crt")
    assert (d.reflected, d.reason) == (False, "explicitly annotated with liqo.io/skip-reflection")
    d = reflection_decision("endpointslice", {ALLOW: ""}, "AllowList", name="ns/e")
    assert (d.reflected, d.reason) == (True, "explicitly annotated with liqo.io/allow-reflection")


def test_unknown_kinds_are_not_reflected() -> None:
    d = reflection_decision("Deployment", {ALLOW: "true"}, "AllowList")
    assert (d.reflected, d.reason, d.error) == (False, "Liqo does not reflect deployment resources", None)


# --- reasons shown in the dashboard ------------------------------------------------------------------------


def test_policy_reasons_name_the_subject_and_annotation() -> None:
    assert (
        reflection_decision("secret", {}, "DenyList").reason
        == "DenyList policy and the secret has no liqo.io/skip-reflection"
    )
    assert reflection_decision("ingress", {SKIP: "FALSE"}, "DenyList").reason == (
        "DenyList policy and the ingress has liqo.io/skip-reflection=false"
    )
    assert (
        reflection_decision("svc", {SKIP: ""}, "DenyList").reason
        == "DenyList policy and the service has liqo.io/skip-reflection"
    )
    assert (
        reflection_decision("cm", {}, "AllowList").reason
        == "AllowList policy and the configmap has no liqo.io/allow-reflection"
    )
    assert reflection_decision("configmaps", {ALLOW: "False"}, "AllowList").reason == (
        "AllowList policy and the configmap has liqo.io/allow-reflection=false"
    )
    assert (
        reflection_decision("secrets", {ALLOW: "yes"}, "AllowList").reason
        == "AllowList policy and the secret has liqo.io/allow-reflection"
    )


def test_endpointslice_reasons() -> None:
    d = reflection_decision("endpointslice", {}, "AllowList", labels=SVC_LABEL, service_annotations={ALLOW: "1"})
    assert (d.reflected, d.reason) == (
        True,
        "AllowList policy and its Service has liqo.io/allow-reflection (inherited by the endpointslice)",
    )
    # Label present but Service unknown, or Service known but no label: the slice's own annotations decide.
    for labels, svc in ((SVC_LABEL, None), ({}, {ALLOW: "1"})):
        d = reflection_decision("endpointslice", {}, "AllowList", labels=labels, service_annotations=svc)
        assert (d.reflected, d.reason) == (
            False,
            "AllowList policy and the endpointslice has no liqo.io/allow-reflection",
        )


def test_event_reasons() -> None:
    d = reflection_decision("events", {SKIP: "true"}, "DenyList")
    assert (d.reflected, d.reason) == (
        False,
        "DenyList policy and the remote event has liqo.io/skip-reflection (events are reflected remote to local only)",
    )


def test_reflection_decision_leaves_annotations_alone() -> None:
    ann = {SKIP: "true"}
    svc = {ALLOW: "true"}
    reflection_decision("endpointslice", ann, "AllowList", labels=SVC_LABEL, service_annotations=svc)
    reflection_decision("secret", ann)
    assert ann == {SKIP: "true"} and svc == {ALLOW: "true"}


# --- anti-affinity labels and presets (f.2) -----------------------------------------------------------------


def test_anti_affinity_labels_without_a_shadow_label_or_removed_keys() -> None:
    assert anti_affinity_labels({"app": "web"}, "vk-milan", None, ["absent"]) == {"app": "web", NODENAME: "vk-milan"}
    assert anti_affinity_labels(None, "vk") == {NODENAME: "vk"}


def test_anti_affinity_labels_do_not_modify_the_pod_labels() -> None:
    labels = {"app": "web", "liqo.io/shadowPod": "true", "pod-template-hash": "x", "skip": "1"}
    before = dict(labels)
    anti_affinity_labels(labels, "vk", {"liqo.io/anti-affinity-labels": "app"}, ["skip"])
    anti_affinity_labels(labels, "vk", None, ["skip"])
    assert labels == before


def test_an_empty_whitelist_annotation_means_no_whitelist() -> None:
    labels = {"app": "web", "pod-template-hash": "x"}
    assert anti_affinity_labels(labels, "vk", {"liqo.io/anti-affinity-labels": ""}) == {"app": "web", NODENAME: "vk"}


def pod(
    preset: str | None, labels: dict[str, str] | None = None, affinity: dict[str, Any] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": labels or {"app": "web", "drop": "me"}}
    if preset is not None:
        meta["annotations"] = {"liqo.io/anti-affinity-preset": preset}
    spec: dict[str, Any] = {}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"metadata": meta, "spec": spec}


def test_soft_and_hard_presets_use_the_virtual_node_and_the_labels_not_reflected() -> None:
    soft = remote_affinity(pod("soft"), "vk-milan", ["drop"])
    assert soft is not None
    term = soft["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["labelSelector"]["matchLabels"] == {"app": "web", NODENAME: "vk-milan"}
    hard = remote_affinity(pod("hard"), "vk-rome", ["drop"])
    assert hard is not None
    term = hard["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchLabels"] == {"app": "web", NODENAME: "vk-rome"}


def test_remote_affinity_copies_the_patch_and_the_local_anti_affinity() -> None:
    patch = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": []}]}
        }
    }
    patch_before = copy.deepcopy(patch)
    out = remote_affinity(pod(None), "vk", None, patch)
    assert out == patch_before
    assert out is not None
    out["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].append({})
    assert patch == patch_before

    local = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}
    p = pod("propagate", affinity=local)
    p_before = copy.deepcopy(p)
    out = remote_affinity(p, "vk")
    assert out == {"podAntiAffinity": p_before["spec"]["affinity"]["podAntiAffinity"]}
    out["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] = "changed"
    assert p == p_before
