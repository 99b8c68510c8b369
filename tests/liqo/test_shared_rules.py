"""Rules of liqo_rules that the sandbox now takes instead of its own copies (issue 9)."""

from __future__ import annotations

import itertools

import pytest

from liqo_rules import constants as c
from liqo_rules.peers import (
    CONSUMER_ROLES,
    PROVIDER_ROLES,
    is_local_namespace_map,
    select_clusters,
    tenant_namespace_name,
)
from liqo_rules.status import compute_status, phase_from_namespace_maps


def test_system_namespaces_are_kubernetes_ones_liqo_install_namespace_and_liqo_system():
    assert c.KUBERNETES_SYSTEM_NAMESPACES == ("kube-system", "kube-public", "kube-node-lease")
    assert c.LIQO_NAMESPACE == "liqo"
    assert c.SYSTEM_NAMESPACES == ("kube-system", "kube-public", "kube-node-lease", "liqo", "liqo-system")


def test_roles():
    assert PROVIDER_ROLES == ("Provider", "ConsumerAndProvider")
    assert CONSUMER_ROLES == ("Consumer", "ConsumerAndProvider")


def test_label_keys_and_webhook_name():
    assert c.RESOURCESLICE_LABEL == "liqo.io/resourceslice-name"
    assert c.TENANT_NAMESPACE_LABEL == "liqo.io/tenant-namespace"
    assert c.CLUSTER_PROVIDER_LABEL == "liqo.io/provider"
    assert c.WEBHOOK_NAME == "nsoff.validate.liqo.io"
    assert c.CONTROLLER_MANAGER == "liqo-controller-manager"


def _map(cluster_id: str, desired: bool, phase: str | None) -> dict:
    nm: dict = {"metadata": {"name": cluster_id}, "spec": {"desiredMapping": {"ns": "ns-x"} if desired else {}}}
    if phase is not None:
        nm["status"] = {"currentMapping": {"ns": {"remoteNamespace": "ns-x", "phase": phase}}}
    return nm


STATES = [(d, p) for d in (False, True) for p in (None, "", *c.MAPPING_PHASES)]


@pytest.mark.parametrize("deleting", [False, True])
@pytest.mark.parametrize("states", list(itertools.combinations_with_replacement(STATES, 2)))
def test_compute_status_phase_is_phase_from_namespace_maps(states, deleting):
    maps = [_map(f"c{i}", d, p) for i, (d, p) in enumerate(states)]
    meta = {"generation": 1, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})}
    status = compute_status("ns", {"metadata": meta, "spec": {}}, maps, local_cluster_id="rome", now="t")
    assert status["offloadingPhase"] == phase_from_namespace_maps("ns", maps, deleting=deleting)


def test_phase_from_namespace_maps_counts_required_ready_and_failed():
    maps = [_map("a", True, c.MAPPING_ACCEPTED), _map("b", True, c.MAPPING_CREATION_LOOP_BACKOFF)]
    assert phase_from_namespace_maps("ns", maps, deleting=False) == c.PHASE_SOME_FAILED
    assert phase_from_namespace_maps("ns", maps[:1], deleting=False) == c.PHASE_READY
    assert phase_from_namespace_maps("ns", maps[1:], deleting=False) == c.PHASE_ALL_FAILED
    assert phase_from_namespace_maps("ns", [_map("a", True, None)], deleting=False) == c.PHASE_IN_PROGRESS
    assert phase_from_namespace_maps("ns", [_map("a", False, None)], deleting=False) == c.PHASE_NO_CLUSTER_SELECTED
    assert phase_from_namespace_maps("ns", maps, deleting=True) == c.PHASE_TERMINATING


def test_tenant_namespace_name():
    assert tenant_namespace_name("milan") == "liqo-tenant-milan"


@pytest.mark.parametrize(
    ("labels", "local"),
    [
        ({c.REPLICATION_LABEL: "true", c.REMOTE_ID_LABEL: "", c.REMOTE_CLUSTER_ID_LABEL: "milan"}, True),
        ({c.REPLICATION_LABEL: "true", c.REMOTE_ID_LABEL: "milan", c.REMOTE_CLUSTER_ID_LABEL: "milan"}, True),
        ({c.REPLICATION_LABEL: "false", c.REMOTE_ID_LABEL: "milan", c.REMOTE_CLUSTER_ID_LABEL: "milan"}, False),
        ({c.REMOTE_ID_LABEL: "milan", c.REMOTE_CLUSTER_ID_LABEL: "milan"}, False),
        ({c.REPLICATION_LABEL: "true", c.REMOTE_CLUSTER_ID_LABEL: "milan"}, False),
        ({c.REPLICATION_LABEL: "true", c.REMOTE_ID_LABEL: "milan", c.REMOTE_CLUSTER_ID_LABEL: ""}, False),
        ({c.REPLICATION_LABEL: "true", c.REMOTE_ID_LABEL: "milan"}, False),
        (None, False),
    ],
)
def test_is_local_namespace_map(labels, local):
    assert is_local_namespace_map({"metadata": {"name": "milan", "labels": labels}}) is local


def _random_selector(rnd):
    def requirement(keys):
        req = {
            "key": rnd.choice(keys),
            "operator": rnd.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bad"]),
        }
        if rnd.random() < 0.8:
            req["values"] = rnd.sample(["1", "2", "x", "", "a b"], rnd.randint(0, 2))
        return req

    terms = []
    for _ in range(rnd.randint(0, 3)):
        term = {}
        if rnd.random() < 0.8:
            term["matchExpressions"] = [requirement(["a", "b", "", "Bad Key"]) for _ in range(rnd.randint(0, 2))]
        if rnd.random() < 0.3:
            term["matchFields"] = [requirement(["metadata.name", "x"])]
        terms.append(term)
    return {"nodeSelectorTerms": terms} if rnd.random() < 0.95 else None


def test_select_clusters_without_terms_reaches_the_same_verdicts():
    import random

    rnd = random.Random(9)
    seen_error = seen_selected = seen_rejected = seen_disagree = 0
    for _ in range(3000):
        selector = _random_selector(rnd)
        vns = [
            (
                rnd.choice(["milan", "turin"]),
                rnd.choice(["1", "vk", "milan"]),
                {k: rnd.choice(["1", "2", "x"]) for k in "ab" if rnd.random() < 0.6},
            )
            for _ in range(rnd.randint(0, 4))
        ]
        full = select_clusters(selector, vns)
        fast = select_clusters(selector, vns, terms=False)
        assert list(fast) == list(full)
        for cluster_id, entry in full.items():
            quick = fast[cluster_id]
            for key in ("selected", "disagree", "error", "reached"):
                assert quick[key] == entry[key]
            assert [(vn, why["selected"], why["error"]) for vn, why in quick["explanations"]] == [
                (vn, why["selected"], why["error"]) for vn, why in entry["explanations"]
            ]
            assert all(set(why) == {"selected", "error"} for _, why in quick["explanations"])
            seen_error += bool(entry["error"])
            seen_selected += entry["reached"] and entry["selected"]
            seen_rejected += entry["reached"] and not entry["selected"] and not entry["error"]
            seen_disagree += entry["disagree"]
    assert min(seen_error, seen_selected, seen_rejected, seen_disagree) > 0


def test_compute_status_neither_changes_nor_shares_the_previous_status():
    import copy

    old_conditions = [
        {
            "type": c.CONDITION_OFFLOADING_REQUIRED,
            "status": "True",
            "reason": c.REASON_CLUSTER_SELECTED,
            "lastTransitionTime": "t0",
        },
        {"type": c.CONDITION_READY, "status": "True", "reason": c.REASON_NAMESPACE_CREATED, "lastTransitionTime": "t0"},
    ]
    obj = {
        "metadata": {"generation": 2},
        "spec": {},
        "status": {"remoteNamespacesConditions": {"a": old_conditions, "gone": old_conditions}},
    }
    before = copy.deepcopy(obj)
    status = compute_status("ns", obj, [_map("a", True, c.MAPPING_ACCEPTED)], local_cluster_id="rome", now="t1")
    assert obj == before
    kept = status["remoteNamespacesConditions"]["a"]
    assert kept == old_conditions and kept is not old_conditions
    assert all(new is not old for new, old in zip(kept, old_conditions, strict=True))
    assert "gone" not in status["remoteNamespacesConditions"]
    kept[0]["status"] = "False"
    assert obj == before
