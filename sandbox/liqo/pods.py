"""Demo pods: a stand-in scheduler and kubelet that bind pending pods to local nodes, or to the virtual
nodes of clusters where the namespace is ready, as the pod offloading strategy allows (a.6)."""

from __future__ import annotations

import hashlib
from typing import Any

from offloading.liqo import constants as c
from sandbox.apicommon import now_iso
from sandbox.kinds import NAMESPACE_OFFLOADINGS, NODES, PODS
from sandbox.liqo.context import LiqoContext
from sandbox.store import Obj, clone


class PodController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx

    def reconcile(self, namespace: str) -> float | None:
        """Bind pending pods: local nodes, and virtual nodes of clusters where the namespace is ready."""
        store, server = self.ctx.store, self.ctx.server
        pending = [
            p
            for p in store.items(PODS, namespace)
            if not (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]
        if not pending:
            return None
        nsoff = store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        strategy = (nsoff.get("spec") or {}).get("podOffloadingStrategy") if nsoff else c.LOCAL
        local_nodes, virtual_nodes = self._nodes(_ready_clusters(nsoff))
        candidates = {c.LOCAL: local_nodes, c.REMOTE: virtual_nodes}.get(strategy or "", local_nodes + virtual_nodes)
        if not candidates:
            return None
        for pod in pending:
            node_name = candidates[_digest(pod) % len(candidates)]
            body = clone(pod)
            body["spec"]["nodeName"] = node_name
            on_virtual = node_name in virtual_nodes
            if on_virtual:
                body["metadata"].setdefault("labels", {})[c.SHADOW_POD_LABEL] = "true"
            bound = server.update(PODS, namespace, pod["metadata"]["name"], body, manager="kube-scheduler").obj
            fresh = clone(bound)
            fresh["status"] = running_pod_status(fresh, on_virtual)
            server.update(PODS, namespace, pod["metadata"]["name"], fresh, manager="kubelet", subresource="status")
        return None

    def _nodes(self, ready_clusters: set[str]) -> tuple[list[str], list[str]]:
        """Schedulable local nodes, and virtual nodes of reachable clusters in `ready_clusters`."""
        local_nodes, virtual_nodes = [], []
        for node in self.ctx.store.items(NODES):
            labels = node["metadata"].get("labels") or {}
            if labels.get(c.VIRTUAL_NODE_TYPE_LABEL) == c.VIRTUAL_NODE_TYPE_VALUE:
                cluster_id = labels.get(c.REMOTE_CLUSTER_ID_LABEL, "")
                if cluster_id in ready_clusters and not self.ctx.faults.peer_is_down(cluster_id):
                    virtual_nodes.append(node["metadata"]["name"])
            elif "node-role.kubernetes.io/control-plane" not in labels:
                local_nodes.append(node["metadata"]["name"])
        return local_nodes, virtual_nodes


def _ready_clusters(nsoff: Obj | None) -> set[str]:
    conditions = ((nsoff or {}).get("status") or {}).get("remoteNamespacesConditions") or {}
    return {
        cluster_id
        for cluster_id, conds in conditions.items()
        if any(cd.get("type") == c.CONDITION_READY and cd.get("status") == "True" for cd in conds)
    }


def _digest(pod: Obj) -> int:
    return int(hashlib.sha1(pod["metadata"]["name"].encode()).hexdigest(), 16)


def running_pod_status(pod: Obj, on_virtual: bool) -> dict[str, Any]:
    now = now_iso()
    digest = _digest(pod)
    ip = f"10.{(71 if on_virtual else 244)}.{digest % 250}.{(digest >> 8) % 250 + 2}"
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        "phase": "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "hostIP": "10.42.0.1",
        "startTime": now,
        "qosClass": "BestEffort",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
        "containerStatuses": [
            {
                "name": ct.get("name"),
                "image": ct.get("image"),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for ct in containers
        ],
    }
