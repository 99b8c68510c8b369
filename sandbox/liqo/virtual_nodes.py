"""VirtualNodes (liqo-semantics.md c.2, c.3, c.5): the NamespaceMap of each peer and the virtual Node the
virtual kubelet registers for each VirtualNode, with Liqo's labels, taint and capacity."""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.peers import tenant_namespace_name
from sandbox.apicommon import now_iso
from sandbox.kinds import NAMESPACE_MAPS, NAMESPACES, NODES, VIRTUAL_NODES
from sandbox.liqo.context import Condition, LiqoContext
from sandbox.objects import Obj, clone

NODE_INFO = {
    "kubeletVersion": "v1.35.2",
    "osImage": "Liqo virtual node",
    "architecture": "amd64",
    "operatingSystem": "linux",
    "containerRuntimeVersion": "liqo://v1.0.0",
    "kernelVersion": "",
    "kubeProxyVersion": "",
    "machineID": "",
    "systemUUID": "",
    "bootID": "",
}


class VirtualNodeController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx

    def reconcile(self, cluster_id: str) -> float | None:
        ctx = self.ctx
        vns = [vn for vn in ctx.store.items(VIRTUAL_NODES) if (vn.get("spec") or {}).get("clusterID") == cluster_id]
        tenant = tenant_namespace_name(cluster_id)
        nm = ctx.store.get(NAMESPACE_MAPS, tenant, cluster_id)
        if not vns:
            if nm is not None:
                ctx.server.delete(NAMESPACE_MAPS, tenant, cluster_id)
            return None
        if nm is None and ctx.store.get(NAMESPACES, "", tenant) is not None:
            ctx.create(NAMESPACE_MAPS, namespace_map(cluster_id))
        for vn in vns:
            if vn["metadata"].get("deletionTimestamp") or (vn.get("spec") or {}).get("createNode", True) is False:
                continue
            self._sync_node(vn)
        return None

    def _sync_node(self, vn: Obj) -> None:
        desired = node_for(vn, ready=not self.ctx.faults.peer_is_down((vn.get("spec") or {}).get("clusterID") or ""))
        node = self.ctx.store.get(NODES, "", vn["metadata"]["name"])
        if node is None:
            self.ctx.create(NODES, desired)
            return
        labels = dict(node["metadata"].get("labels") or {})
        merged = dict(labels, **desired["metadata"]["labels"])
        capacity = desired["status"]["capacity"]
        capacity_changed = (node.get("status") or {}).get("capacity") != capacity
        if merged == labels and not capacity_changed:
            return
        body = clone(node)
        body["metadata"]["labels"] = merged
        self.ctx.write(NODES, body)
        if capacity_changed:
            fresh = clone(self.ctx.store.must_get(NODES, "", node["metadata"]["name"]))
            fresh["status"] = dict(fresh.get("status") or {}, capacity=capacity, allocatable=capacity)
            self.ctx.write(NODES, fresh, subresource="status")


def namespace_map(cluster_id: str) -> Obj:
    """The NamespaceMap of a peer, labelled so that the controller counts it as local (a.4)."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": "NamespaceMap",
        "metadata": {
            "name": cluster_id,
            "namespace": tenant_namespace_name(cluster_id),
            "labels": {
                c.REMOTE_CLUSTER_ID_LABEL: cluster_id,
                c.REPLICATION_LABEL: "true",
                c.REMOTE_ID_LABEL: cluster_id,
            },
        },
        "spec": {},
    }


def node_for(vn: Obj, ready: bool = True) -> Obj:
    """The Node the virtual kubelet registers for a VirtualNode (c.3)."""
    spec = vn.get("spec") or {}
    name = vn["metadata"]["name"]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/role": "agent",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        c.VIRTUAL_NODE_TYPE_LABEL: c.VIRTUAL_NODE_TYPE_VALUE,
        "type": "virtual-kubelet",
        c.REMOTE_CLUSTER_ID_LABEL: spec.get("clusterID") or "",
        "node.kubernetes.io/exclude-from-external-load-balancers": "true",
        "alpha.service-controller.kubernetes.io/exclude-balancer": "true",
    }
    labels.update(spec.get("labels") or {})
    labels[c.STORAGE_AVAILABLE_LABEL] = "true" if spec.get("storageClasses") else "false"
    taint = {
        "key": c.VIRTUAL_NODE_TAINT_KEY,
        "value": c.VIRTUAL_NODE_TAINT_VALUE,
        "effect": c.VIRTUAL_NODE_TAINT_EFFECT,
    }
    capacity = dict(((spec.get("resourceQuota") or {}).get("hard")) or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": dict(spec.get("annotations") or {})},
        "spec": {"taints": list(spec.get("taints") or []) + [taint]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [node_ready_condition(ready)],
            "nodeInfo": dict(NODE_INFO),
            "addresses": [{"type": "InternalIP", "address": "10.42.0.1"}],
        },
    }


def node_ready_condition(ready: bool) -> dict[str, Any]:
    """The Ready condition the virtual kubelet posts (Unknown once the peer stops answering)."""
    now = now_iso()
    if ready:
        status, reason, message = "True", "KubeletReady", "The Liqo Virtual Kubelet is posting ready status"
    else:
        status, reason, message = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
    condition: Condition = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
    return {**condition, "lastHeartbeatTime": now}
