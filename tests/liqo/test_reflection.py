"""Liqo reflection policies and anti-affinity presets (liqo-semantics.md f, seed 003)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from liqo_rules.reflection import (
    ReflectionError,
    anti_affinity_labels,
    event_is_reflected,
    reflection_decision,
    remote_affinity,
    should_reflect,
    validate_reflection_policy,
)

DATA = yaml.safe_load((Path(__file__).parent / "data" / "reflection_policy.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("kind", "policy", "annotations", "want"), DATA["policy"])
def test_policy_decisions(kind: str, policy: str, annotations: dict[str, str], want: bool) -> None:
    decision = reflection_decision(kind, annotations, policy)
    assert decision.reflected is want
    assert decision.reason
    assert should_reflect(kind, annotations, policy) is want


@pytest.mark.parametrize(("policy", "annotations", "want"), DATA["root_ca"])
def test_root_ca_configmap(policy: str, annotations: dict[str, str], want: bool) -> None:
    assert reflection_decision("configmap", annotations, policy, name="ns/kube-root-ca.crt").reflected is want


@pytest.mark.parametrize(("policy", "annotations", "labelled", "svc", "want"), DATA["endpointslice"])
def test_endpointslice_inherits_from_its_service(
    policy: str, annotations: dict[str, str], labelled: bool, svc: dict[str, str] | None, want: bool
) -> None:
    labels = {"kubernetes.io/service-name": "web"} if labelled else {}
    decision = reflection_decision(
        "endpointslices", annotations, policy, name="ns/web-abc", labels=labels, service_annotations=svc
    )
    assert decision.reflected is want


def test_both_annotations_on_an_endpointslice_is_an_error() -> None:
    both = {"liqo.io/allow-reflection": "true", "liqo.io/skip-reflection": "true"}
    decision = reflection_decision("endpointslice", both, "DenyList", name="ns/web-abc")
    assert decision.reflected is False
    assert decision.error == 'object "ns/web-abc" can\'t have both the allow and deny annotations set'


def test_invalid_policy_uses_the_virtual_kubelet_message() -> None:
    with pytest.raises(ReflectionError) as info:
        validate_reflection_policy("secrets", "Deny")
    assert str(info.value) == (
        'reflection type "Deny" is not valid for resource secret. Ammitted values: "DenyList", "AllowList"'
    )
    with pytest.raises(ReflectionError):
        reflection_decision("secret", {}, "allowlist")


def test_other_kinds() -> None:
    assert reflection_decision("deployment", {}, "DenyList").reflected is False
    assert reflection_decision("persistentvolume", {}, "DenyList").reflected is False
    assert event_is_reflected("Pod", namespace_offloaded=True)
    assert not event_is_reflected("Deployment", namespace_offloaded=True)
    assert not event_is_reflected("pods", namespace_offloaded=False)


POD: dict[str, Any] = {
    "metadata": {
        "labels": {
            "app": "web",
            "tier": "front",
            "liqo.io/shadowPod": "true",
            "pod-template-hash": "abc",
            "controller-revision-hash": "r1",
            "statefulset.kubernetes.io/pod-name": "web-0",
        },
        "annotations": {},
    },
    "spec": {
        "affinity": {
            "nodeAffinity": {"x": 1},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
        }
    },
}


def test_anti_affinity_labels_default_filtering() -> None:
    assert anti_affinity_labels(POD["metadata"]["labels"], "milan") == {
        "app": "web",
        "tier": "front",
        "offloading.liqo.io/nodename": "milan",
    }
    assert anti_affinity_labels(POD["metadata"]["labels"], "milan", labels_not_reflected=["tier"]) == {
        "app": "web",
        "offloading.liqo.io/nodename": "milan",
    }


def test_anti_affinity_labels_whitelist_is_not_trimmed() -> None:
    labels = POD["metadata"]["labels"]
    ann = {"liqo.io/anti-affinity-labels": "app, tier"}
    assert anti_affinity_labels(labels, "milan", ann) == {"app": "web"}
    ann = {"liqo.io/anti-affinity-labels": "app,pod-template-hash"}
    assert anti_affinity_labels(labels, "milan", ann) == {"app": "web", "pod-template-hash": "abc"}


def test_presets() -> None:
    pod = {
        "metadata": {
            **POD["metadata"],
            "annotations": {"liqo.io/anti-affinity-preset": "hard", "liqo.io/anti-affinity-labels": "app"},
        },
        "spec": {},
    }
    assert remote_affinity(pod, "milan") == {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    pod["metadata"]["annotations"]["liqo.io/anti-affinity-preset"] = "soft"
    assert remote_affinity(pod, "milan") == {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }
    patch = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    assert "nodeAffinity" not in remote_affinity(pod, "milan", patch_affinity=patch)


def test_propagate_and_unknown_presets() -> None:
    patch = {"nodeAffinity": {"p": 1}}
    pod = {"metadata": {"annotations": {"liqo.io/anti-affinity-preset": "propagate"}}, "spec": POD["spec"]}
    assert remote_affinity(pod, "milan", patch_affinity=patch) == {
        "podAntiAffinity": POD["spec"]["affinity"]["podAntiAffinity"]
    }
    no_anti = {
        "metadata": {"annotations": {"liqo.io/anti-affinity-preset": "propagate"}},
        "spec": {"affinity": {"nodeAffinity": {"x": 1}}},
    }
    assert remote_affinity(no_anti, "milan", patch_affinity=patch) == patch
    assert remote_affinity(no_anti, "milan") is None
    upper = {"metadata": {"annotations": {"liqo.io/anti-affinity-preset": "Hard"}}, "spec": POD["spec"]}
    assert remote_affinity(upper, "milan") is None
