"""A second managed cluster's snapshot for the tests of issue 28 (tests/test_fleet_readers.py): ``turin``,
whose rows share names with the default cluster's (the ``fleet`` fixture's), written through the real
writers as its watcher would write them."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from offloading.models import (
    Cluster,
    ClusterOffloading,
    KubeEvent,
    ManagedCluster,
    MappingEntry,
    Namespace,
    Pod,
    SnapshotState,
    VirtualNode,
)
from offloading.snapshot import engine as _engine  # noqa: F401 - registers every kind of the watcher (pods, events...)
from offloading.snapshot import informer
from offloading.snapshot.namespacemaps import write_map
from offloading.snapshot.store import store_offloading

REGION = "eu-west"  # the default cluster's milan is in eu-west (the fleet fixture): turin's peers too


def _namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"turin-{name}", "resourceVersion": "11", "labels": labels},
        "status": {"phase": "Active"},
    }


def _offloading(namespace: str, phase: str, selected: dict[str, str]) -> dict[str, Any]:
    """An offloading of turin's that selects ``selected`` (peer -> Ready condition's status)."""
    conditions = {
        peer: [
            {"type": "OffloadingRequired", "status": "True", "reason": "ClusterSelected"},
            {
                "type": "Ready",
                "status": ready,
                "reason": "NamespaceCreated" if ready == "True" else "CreationLoopBackOff",
            },
        ]
        for peer, ready in selected.items()
    }
    return {
        "metadata": {
            "name": "offloading",
            "namespace": namespace,
            "uid": f"turin-off-{namespace}",
            "resourceVersion": "17",
            "generation": 5,
        },
        "spec": {
            "namespaceMappingStrategy": "EnforceSameName",
            "podOffloadingStrategy": "Remote",
            "clusterSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/region", "operator": "In", "values": [REGION]}
                        ]
                    }
                ]
            },
        },
        "status": {
            "offloadingPhase": phase,
            "observedGeneration": 5,
            "remoteNamespaceName": namespace,
            "remoteNamespacesConditions": conditions,
        },
    }


def _peer(cluster_id: str, status: str) -> dict[str, Any]:
    module = {"enabled": True, "conditions": [{"type": "Ready", "status": status, "message": f"turin {status}"}]}
    return {
        "metadata": {"name": cluster_id, "resourceVersion": "5"},
        "spec": {"clusterID": cluster_id},
        "status": {
            "role": "Provider",
            "modules": {"networking": module, "authentication": module, "offloading": module},
        },
    }


def _virtual_node(cluster_id: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": f"liqo-tenant-{cluster_id}", "name": cluster_id, "resourceVersion": "3"},
        "spec": {
            "clusterID": cluster_id,
            "createNode": True,
            "labels": {"topology.kubernetes.io/region": REGION, "turin.example/only": "yes"},
            "resourceQuota": {"hard": {"cpu": "64", "memory": "256Gi", "pods": "900"}},
        },
        "status": {"conditions": [{"type": "Node", "status": "True"}]},
    }


def _pod(namespace: str, name: str, node: str, phase: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": f"turin-{namespace}-{name}"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
        "status": {"phase": phase, **({"reason": "Insufficient cpu"} if phase == "Pending" else {})},
    }


def _event(uid: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": uid, "uid": uid},
        "involvedObject": {"kind": "NamespaceOffloading", "name": "offloading", "namespace": namespace},
        "type": "Warning",
        "reason": "TurinOnly",
        "message": "a warning of turin's",
        "count": 3,
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }


def _namespace_map(peer: str, locals_: list[str]) -> dict[str, Any]:
    labels = {"liqo.io/replication": "true", "liqo.io/remoteID": peer, "liqo.io/remote-cluster-id": peer}
    return {
        "metadata": {"namespace": f"liqo-tenant-{peer}", "name": peer, "labels": labels, "resourceVersion": "3"},
        "spec": {"desiredMapping": {local: local for local in locals_}},
        "status": {"currentMapping": {local: {"remoteNamespace": local, "phase": "Accepted"} for local in locals_}},
    }


def write_turin() -> ManagedCluster:
    """A managed cluster ``turin`` whose snapshot shares names with the default one (the fleet fixture):
    its own namespaces shop, payments (labelled team=pay, as the default's), default, kube-system and
    etl; peers milan and naples (other statuses) and genoa; offloadings of shop and etl; pods, events,
    NamespaceMaps and its snapshot state. Written as its watcher would (the KindSyncs of its own set)."""
    turin = ManagedCluster.objects.create(name="turin", context="turin")
    syncs = informer.build(turin)
    now = timezone.now()

    def relist(kind: str, items: list[dict[str, Any]]) -> None:
        sync = syncs[kind]
        sync.apply([("ADDED", obj) for obj in items], now, relist=True)
        sync.relisted({sync.key(obj) for obj in items}, now)

    relist(
        "namespaces",
        [
            _namespace("shop", {"team": "pay", "env": "prod"}),
            _namespace("payments", {"team": "pay"}),
            _namespace("default", {}),
            _namespace("kube-system", {}),
            _namespace("etl", {"team": "pay"}),
            _namespace("liqo-tenant-milan", {}),
        ],
    )
    relist("foreignclusters", [_peer("milan", "False"), _peer("naples", "True"), _peer("genoa", "True")])
    relist("virtualnodes", [_virtual_node("milan"), _virtual_node("genoa")])
    relist(
        "namespaceoffloadings",
        [
            _offloading("shop", "InProgress", {"milan": "False", "genoa": "True", "naples": "False"}),
            _offloading("etl", "Ready", {"genoa": "True"}),
        ],
    )
    relist(
        "pods",
        [
            _pod("shop", "web-1", "milan", "Running"),
            _pod("shop", "web-2", "genoa", "Pending"),
            _pod("etl", "job-1", "genoa", "Running"),
        ],
    )
    relist("events", [_event("turin-ev-1", "shop"), _event("turin-ev-2", "etl")])
    for peer in ("milan", "genoa", "naples"):
        write_map(_namespace_map(peer, ["shop", "etl"]), now, turin)
    store_offloading("payments", _offloading("payments", "Ready", {"milan": "True"}), managed=turin)
    SnapshotState.touch(turin, last_success_at=now, last_attempt_at=now, local_cluster_id="turin")
    assert Namespace.objects.filter(managed=turin, name="shop", offloaded=True).exists()
    assert ClusterOffloading.objects.filter(managed=turin).count() >= 5
    assert Pod.objects.filter(managed=turin).count() == 3 and KubeEvent.objects.filter(managed=turin).count() == 2
    assert MappingEntry.objects.filter(managed=turin).count() == 6
    assert Cluster.objects.filter(managed=turin).count() == 3 and VirtualNode.objects.filter(managed=turin).count() == 2
    return turin


def write_default_inventory() -> None:
    """The default cluster's own pods, events and NamespaceMap (the fleet fixture has none), through its
    writers too, so that a reader mixing the two clusters' rows has rows of both to mix."""
    syncs = informer.build()
    now = timezone.now()
    syncs["pods"].apply([("ADDED", {**_pod("shop", "web-1", "milan", "Running")})], now)
    syncs["events"].apply([("ADDED", {**_event("rome-ev-1", "shop"), "reason": "RomeOnly"})], now)
    write_map(_namespace_map("milan", ["shop"]), now)
