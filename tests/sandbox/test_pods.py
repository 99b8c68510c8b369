"""The stand-in scheduler places pods where Liqo's pod webhook lets them run (liqo-semantics.md a.6, e)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sandbox.conftest import Clients, expr, selector

EU_SOUTH = selector([expr("topology.kubernetes.io/region", "In", "eu-south-1")])  # milan only


def _nodes_by_cluster(kube: Clients) -> dict[str, str]:
    """Node name -> remote cluster id ("" for local nodes)."""
    return {
        n.metadata.name: (n.metadata.labels or {}).get("liqo.io/remote-cluster-id", "")
        for n in kube.core.list_node().items
    }


def _bound_pods(kube: Clients, namespace: str, count: int) -> list[Any]:
    for i in range(count):
        kube.core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": f"web-{i}", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        )
    kube.sb.wait_idle(10)
    return kube.core.list_namespaced_pod(namespace).items


@pytest.mark.parametrize(
    ("strategy", "allowed"),
    [
        ("Local", {""}),
        ("Remote", {"milan"}),
        ("LocalAndRemote", {"", "milan"}),
    ],
)
def test_pods_run_where_the_strategy_and_the_selector_allow(kube: Clients, strategy: str, allowed: set[str]) -> None:
    kube.create_nsoff("alpha", {"podOffloadingStrategy": strategy, "clusterSelector": EU_SOUTH})
    kube.sb.wait_idle(10)
    assert kube.get_nsoff("alpha")["status"]["offloadingPhase"] == "Ready"
    cluster_of = _nodes_by_cluster(kube)
    pods = _bound_pods(kube, "alpha", 12)
    assert len(pods) == 12 and all(p.spec.node_name for p in pods)
    placed = {cluster_of[p.spec.node_name] for p in pods}
    assert placed == allowed  # 12 pods hash over every allowed node, and never elsewhere
    assert "rome-control-plane" not in {p.spec.node_name for p in pods}  # its NoSchedule taint
    for pod in pods:
        shadow = (pod.metadata.labels or {}).get("liqo.io/shadowPod") == "true"
        assert shadow == (cluster_of[pod.spec.node_name] != "")
        assert pod.status.phase == "Running"


def test_pods_outside_offloaded_namespaces_stay_local(kube: Clients) -> None:
    cluster_of = _nodes_by_cluster(kube)
    pods = _bound_pods(kube, "beta", 6)
    assert {p.spec.node_name for p in pods} == {"rome-worker-1"}
    assert all(cluster_of[p.spec.node_name] == "" for p in pods)


def test_a_pods_own_node_affinity_is_merged_with_the_imposed_one(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"podOffloadingStrategy": "LocalAndRemote"})  # every cluster, nothing imposed
    kube.sb.wait_idle(10)
    cluster_of = _nodes_by_cluster(kube)
    on_florence = {
        "requiredDuringSchedulingIgnoredDuringExecution": selector(
            [expr("liqo.io/remote-cluster-id", "In", "florence")]
        )
    }
    for i in range(4):
        kube.core.create_namespaced_pod(
            "alpha",
            {
                "metadata": {"name": f"pinned-{i}"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}], "affinity": {"nodeAffinity": on_florence}},
            },
        )
    kube.sb.wait_idle(10)
    pods = kube.core.list_namespaced_pod("alpha").items
    assert {cluster_of[p.spec.node_name] for p in pods} == {"florence"}


def test_a_pod_that_fits_no_node_stays_pending(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"podOffloadingStrategy": "Remote", "clusterSelector": EU_SOUTH})
    kube.sb.wait_idle(10)
    local_only = {
        "requiredDuringSchedulingIgnoredDuringExecution": selector(
            [expr("kubernetes.io/hostname", "In", "rome-worker-1")]
        )
    }
    kube.core.create_namespaced_pod(
        "alpha",
        {
            "metadata": {"name": "local-only"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "affinity": {"nodeAffinity": local_only}},
        },
    )
    kube.sb.wait_idle(10)
    pod = kube.core.read_namespaced_pod("local-only", "alpha")
    assert pod.spec.node_name is None  # Remote imposes liqo.io/type In (virtual-node): no node satisfies both


def test_a_pod_no_node_has_room_for_is_unschedulable_with_the_schedulers_message(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"podOffloadingStrategy": "Remote", "clusterSelector": EU_SOUTH})  # milan: 32 CPU
    kube.sb.wait_idle(10)

    def pod(name: str, cpu: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
                ]
            },
        }

    kube.core.create_namespaced_pod("alpha", pod("first", "20"))
    kube.sb.wait_idle(10)
    assert kube.core.read_namespaced_pod("first", "alpha").spec.node_name == "milan"
    kube.core.create_namespaced_pod("alpha", pod("second", "20000m"))  # 20 + 20 > 32: no room left
    kube.sb.wait_idle(10)
    second = kube.core.read_namespaced_pod("second", "alpha")
    assert second.spec.node_name is None and second.status.phase == "Pending"
    (scheduled,) = second.status.conditions
    assert (scheduled.type, scheduled.status, scheduled.reason) == ("PodScheduled", "False", "Unschedulable")
    assert scheduled.message.startswith("0/3 nodes are available: 1 Insufficient cpu, ")
    assert "didn't match Pod's node affinity/selector" in scheduled.message  # rome-worker-1: Remote strategy
    kube.core.create_namespaced_pod("alpha", pod("small", "8"))
    kube.sb.wait_idle(10)
    assert kube.core.read_namespaced_pod("small", "alpha").spec.node_name == "milan", "12 CPU are still free"
