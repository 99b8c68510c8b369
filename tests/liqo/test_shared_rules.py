"""Rules of offloading.liqo that the sandbox now takes instead of its own copies (issue 9)."""

from __future__ import annotations

import itertools

import pytest

from offloading.liqo import constants as c
from offloading.liqo.peers import CONSUMER_ROLES, PROVIDER_ROLES, is_local_namespace_map, tenant_namespace_name
from offloading.liqo.status import compute_status, phase_from_namespace_maps


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
