"""The pod-mutation preview never modifies its inputs and never shares structure with them
(liqo-semantics.md e: the webhook works on a copy of the pod; the dashboard previews over snapshot data)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from liqo_rules.webhook import (
    MutationError,
    fill_pod_node_selector,
    imposed_node_selector,
    mutate_pod,
    virtual_node_toleration,
)

TYPE_KEY = "liqo.io/type"


def selector() -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["north"]}]},
            {"matchExpressions": [{"key": "size", "operator": "Exists"}]},
        ]
    }


def pod_with_affinity() -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                        ]
                    }
                }
            },
        },
    }


@pytest.mark.parametrize("strategy", ["Remote", "LocalAndRemote"])
def test_mutate_pod_leaves_spec_and_pod_untouched(strategy: str) -> None:
    spec = {"podOffloadingStrategy": strategy, "clusterSelector": selector()}
    pod = pod_with_affinity()
    spec_before, pod_before = copy.deepcopy(spec), copy.deepcopy(pod)
    out = mutate_pod(spec, pod)
    assert spec == spec_before and pod == pod_before
    # The result shares nothing with the inputs: editing it deeply leaves them as they were.
    out["spec"]["tolerations"][0]["key"] = "changed"
    req = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    req["nodeSelectorTerms"][0]["matchExpressions"][0]["values"].append("changed")
    req["nodeSelectorTerms"][0]["matchExpressions"].append({"key": "x", "operator": "Exists"})
    assert spec == spec_before and pod == pod_before


def test_mutate_pod_on_a_pod_without_affinity_does_not_alias_the_cluster_selector() -> None:
    spec = {"podOffloadingStrategy": "Remote", "clusterSelector": selector()}
    spec_before = copy.deepcopy(spec)
    out = mutate_pod(spec, {"spec": {}})
    req = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert req["nodeSelectorTerms"][0]["matchExpressions"][-1] == {
        "key": TYPE_KEY,
        "operator": "In",
        "values": ["virtual-node"],
    }
    req["nodeSelectorTerms"][0]["matchExpressions"][0]["values"].append("changed")
    req["nodeSelectorTerms"][1]["matchExpressions"].clear()
    assert spec == spec_before


@pytest.mark.parametrize("strategy", ["Local", "Remote"])
def test_an_unchanged_pod_is_still_a_copy(strategy: str) -> None:
    pod = {"spec": {"runtimeClassName": "liqo", "containers": [{"name": "c"}]}}
    pod_before = copy.deepcopy(pod)
    out = mutate_pod({"podOffloadingStrategy": strategy}, pod)
    assert out == pod_before
    out["spec"]["containers"][0]["name"] = "changed"
    assert pod == pod_before


def test_a_pod_without_spec_gets_one_only_in_the_copy() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    out = mutate_pod({"podOffloadingStrategy": "Remote"}, pod)
    assert pod == {"metadata": {"name": "p"}}
    assert out["spec"]["tolerations"] == [virtual_node_toleration()]


def test_imposed_node_selector_does_not_alias_the_spec() -> None:
    for strategy in ("Remote", "LocalAndRemote"):
        spec = {"podOffloadingStrategy": strategy, "clusterSelector": selector()}
        before = copy.deepcopy(spec)
        imposed = imposed_node_selector(spec)
        assert imposed is not None
        imposed["nodeSelectorTerms"][0]["matchExpressions"][0]["values"].append("changed")
        imposed["nodeSelectorTerms"][1].clear()
        assert spec == before, strategy


def test_fill_pod_node_selector_copies_the_imposed_selector_and_the_pod() -> None:
    imposed = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": TYPE_KEY, "operator": "In", "values": ["virtual-node"]}]}]
    }
    for pod in (
        {"spec": {}},
        {"spec": {"affinity": {}}},
        {"spec": {"affinity": {"nodeAffinity": {}}}},
        pod_with_affinity(),
    ):
        imposed_before, pod_before = copy.deepcopy(imposed), copy.deepcopy(pod)
        out = fill_pod_node_selector(imposed, pod)
        req = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        req["nodeSelectorTerms"][0]["matchExpressions"][-1]["values"].append("changed")
        assert imposed == imposed_before and pod == pod_before


def test_the_toleration_is_a_fresh_dict_each_time() -> None:
    t = virtual_node_toleration()
    t["key"] = "changed"
    assert virtual_node_toleration() == {
        "key": "virtual-node.liqo.io/not-allowed",
        "operator": "Exists",
        "effect": "NoExecute",
    }


def test_unknown_strategy_message() -> None:
    with pytest.raises(MutationError) as err:
        mutate_pod({"podOffloadingStrategy": "Sometimes"}, {"spec": {}})
    # liqo-semantics.md e: the webhook fails with "unknown PodOffloadingStrategyType"; we name the value.
    assert str(err.value).startswith("unknown PodOffloadingStrategyType") and "Sometimes" in str(err.value)
    with pytest.raises(MutationError) as err2:
        imposed_node_selector({"podOffloadingStrategy": "Sometimes"})
    assert str(err2.value).startswith("unknown PodOffloadingStrategyType") and "Sometimes" in str(err2.value)


def test_merge_node_selectors_output_shares_nothing_with_its_inputs() -> None:
    from liqo_rules.webhook import merge_node_selectors

    pod_sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}, {}]}
    imposed = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": TYPE_KEY, "operator": "In", "values": ["virtual-node"]}]},
            {},
        ]
    }
    pod_before, imposed_before = copy.deepcopy(pod_sel), copy.deepcopy(imposed)
    out = merge_node_selectors(pod_sel, imposed)
    # Cross product, pod expressions first; a pair with no expressions is an empty term (Go omitempty).
    assert out == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": pod_before["nodeSelectorTerms"][0]["matchExpressions"]
                + imposed_before["nodeSelectorTerms"][0]["matchExpressions"]
            },
            {"matchExpressions": pod_before["nodeSelectorTerms"][0]["matchExpressions"]},
            {"matchExpressions": imposed_before["nodeSelectorTerms"][0]["matchExpressions"]},
            {},
        ]
    }
    for term in out["nodeSelectorTerms"]:
        for expr in term.get("matchExpressions", []):
            expr["values"].append("changed")
    assert pod_sel == pod_before and imposed == imposed_before


def test_fill_pod_node_selector_on_a_pod_without_spec() -> None:
    imposed = {"nodeSelectorTerms": [{}]}
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    out = fill_pod_node_selector(imposed, pod)
    assert out == {
        "metadata": {"name": "p"},
        "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": imposed}}},
    }
    assert pod == {"metadata": {"name": "p"}}
