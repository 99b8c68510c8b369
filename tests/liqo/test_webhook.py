"""Conformance of liqo_rules.webhook with Liqo's pod mutating webhook (pkg/webhooks/pod/pod_test.go)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from liqo_rules.webhook import (
    MutationError,
    fill_pod_node_selector,
    imposed_node_selector,
    merge_node_selectors,
    mutate_pod,
)

DATA = yaml.safe_load((Path(__file__).parent / "data" / "liqo_pod_webhook.yaml").read_text(encoding="utf-8"))
FIX = DATA["fixtures"]
TOLERATION = {"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"}


def spec_for(strategy: str, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    """A NamespaceOffloading spec like the upstream fixture GetNamespaceOffloading."""
    return {
        "namespaceMappingStrategy": "EnforceSameName",
        "podOffloadingStrategy": strategy,
        "clusterSelector": copy.deepcopy(selector if selector is not None else FIX["cluster_selector"]),
    }


def required_of(pod: dict[str, Any]) -> Any:
    return pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]


@pytest.mark.parametrize(("strategy", "added"), DATA["toleration"])
def test_toleration_per_strategy(strategy: str, added: bool) -> None:
    out = mutate_pod(spec_for(strategy), {"spec": {}})
    assert out["spec"].get("tolerations", []) == ([TOLERATION] if added else [])


@pytest.mark.parametrize(("strategy", "want"), DATA["imposed"])
def test_imposed_node_selector(strategy: str, want: dict[str, Any] | None) -> None:
    assert imposed_node_selector(spec_for(strategy)) == want


def test_merge_is_the_cross_product_with_pod_expressions_first() -> None:
    merge = DATA["merge"]
    assert merge_node_selectors(merge["pod"], merge["imposed"]) == merge["want"]


@pytest.mark.parametrize("case", DATA["fill_pod"]["cases"], ids=lambda c: c["name"])
def test_imposed_selector_is_inserted_according_to_the_pod_affinity(case: dict[str, Any]) -> None:
    pod: dict[str, Any] = {"metadata": {"name": "pod", "namespace": "test"}, "spec": {}}
    if case["affinity"] is not None:
        pod["spec"]["affinity"] = copy.deepcopy(case["affinity"])
    imposed = copy.deepcopy(DATA["fill_pod"]["imposed"])
    before_pod, before_imposed = copy.deepcopy(pod), copy.deepcopy(imposed)
    out = fill_pod_node_selector(imposed, pod)
    assert imposed == before_imposed and pod == before_pod
    assert required_of(out) == case["want"]
    for key, value in (case.get("keeps") or {}).items():
        assert out["spec"]["affinity"][key] == value


@pytest.mark.parametrize("case", DATA["mutate"]["cases"], ids=lambda c: c[0])
def test_mutate_pod_strategies_and_runtime_class(case: list[Any]) -> None:
    name, strategy, has_rc, want, added = case
    cfg = DATA["mutate"]
    pod: dict[str, Any] = {
        "metadata": {"name": "pod", "namespace": "test"},
        "spec": {
            "tolerations": copy.deepcopy(cfg["pod_tolerations"]),
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": copy.deepcopy(cfg["pod_required"])}
            },
        },
    }
    if has_rc:
        pod["spec"]["runtimeClassName"] = cfg["runtime_class"]
    spec = {**cfg["namespace_offloading"], "podOffloadingStrategy": strategy}
    before_pod, before_spec = copy.deepcopy(pod), copy.deepcopy(spec)
    out = mutate_pod(spec, pod, cfg["runtime_class"])
    assert pod == before_pod and spec == before_spec
    assert out["spec"]["tolerations"] == cfg["pod_tolerations"] + ([TOLERATION] if added else [])
    got = required_of(out)["nodeSelectorTerms"]
    assert sorted(map(repr, got)) == sorted(map(repr, want["nodeSelectorTerms"]))  # ConsistOf
    assert got == want["nodeSelectorTerms"]  # and, stronger, the exact order


def test_a_runtime_class_other_than_liqo_is_still_mutated() -> None:
    case = DATA["other_runtime_class"]
    pod = {
        "spec": {
            "runtimeClassName": case["pod_runtime_class"],
            "tolerations": [{"key": "test"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": FIX["pod_node_selector"]}},
        }
    }
    out = mutate_pod(spec_for(case["strategy"]), pod, case["webhook_runtime_class"])
    assert len(out["spec"]["tolerations"]) == case["tolerations"]
    assert out["spec"]["tolerations"][1] == TOLERATION
    assert required_of(out) == case["want"]


# --------------------------------------------------------------------------------------------------
# Behaviour documented in liqo-semantics.md section e.


def test_remote_with_empty_selector_targets_every_virtual_node() -> None:
    out = mutate_pod({"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": []}}, {"spec": {}})
    assert required_of(out) == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}]}
        ]
    }


def test_local_and_remote_with_empty_selector_only_adds_the_toleration() -> None:
    out = mutate_pod({"podOffloadingStrategy": "LocalAndRemote"}, {"spec": {"containers": []}})
    assert out == {"spec": {"containers": [], "tolerations": [TOLERATION]}}


def test_empty_selector_string_edge_case() -> None:
    selector = {"nodeSelectorTerms": [{}]}
    remote = mutate_pod({"podOffloadingStrategy": "Remote", "clusterSelector": selector}, {"spec": {}})
    assert required_of(remote)["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}]}
    ]
    both = mutate_pod({"podOffloadingStrategy": "LocalAndRemote", "clusterSelector": selector}, {"spec": {}})
    assert required_of(both)["nodeSelectorTerms"] == [
        {},
        {"matchExpressions": [{"key": "liqo.io/type", "operator": "NotIn", "values": ["virtual-node"]}]},
    ]


def test_match_fields_are_dropped_by_the_merge_but_kept_without_pod_terms() -> None:
    selector = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["milan"]}],
            }
        ]
    }
    spec = {"podOffloadingStrategy": "Remote", "clusterSelector": selector}
    alone = mutate_pod(spec, {"spec": {}})
    assert required_of(alone)["nodeSelectorTerms"][0]["matchFields"] == selector["nodeSelectorTerms"][0]["matchFields"]
    pod_sel = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [{"key": "disk", "operator": "Exists"}],
                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["x"]}],
            }
        ]
    }
    pod = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pod_sel}}}}
    merged = required_of(mutate_pod(spec, pod))
    assert merged == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "disk", "operator": "Exists"},
                    {"key": "region", "operator": "In", "values": ["eu"]},
                    {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]},
                ]
            }
        ]
    }


def test_existing_toleration_is_duplicated_and_other_fields_untouched() -> None:
    pod = {
        "spec": {
            "tolerations": [TOLERATION],
            "nodeSelector": {"disk": "ssd"},
            "nodeName": "n1",
            "affinity": {
                "podAntiAffinity": {"x": 1},
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]},
            },
        }
    }
    out = mutate_pod(spec_for("Remote"), pod)
    assert out["spec"]["tolerations"] == [TOLERATION, TOLERATION]
    assert out["spec"]["nodeSelector"] == {"disk": "ssd"} and out["spec"]["nodeName"] == "n1"
    assert out["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}
    assert out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [{"weight": 1}]


def test_liqo_runtime_class_skips_everything() -> None:
    pod = {"spec": {"runtimeClassName": "liqo"}}
    assert mutate_pod(spec_for("Remote"), pod) == pod


def test_unknown_strategy_fails_like_the_webhook() -> None:
    with pytest.raises(MutationError, match="unknown PodOffloadingStrategyType"):
        mutate_pod({"podOffloadingStrategy": "Sometimes"}, {"spec": {}})
