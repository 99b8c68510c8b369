"""Peers going up and down (the `peer_down` fault): the status of each ForeignCluster, its VirtualNodes
and their Nodes (liqo-semantics.md c.1, c.2, g). What counts as healthy is read back by
`liqo_rules.peers`; the roles come from there too."""

from __future__ import annotations

from typing import Any

from liqo_rules.peers import CONSUMER_ROLES, PROVIDER_ROLES, tenant_namespace_name
from sandbox.apicommon import now_iso
from sandbox.kinds import FOREIGN_CLUSTERS, NODES, VIRTUAL_NODES
from sandbox.liqo.context import Condition, LiqoContext, Peer
from sandbox.liqo.virtual_nodes import node_ready_condition
from sandbox.objects import clone


class PeerController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx

    def reconcile(self, cluster_id: str) -> float | None:
        """Reflect a peer's reachability on its ForeignCluster, VirtualNodes and Nodes."""
        ctx = self.ctx
        peer = ctx.peers.get(cluster_id)
        if peer is None:
            return None
        up = not ctx.faults.peer_is_down(cluster_id)
        fc = ctx.store.get(FOREIGN_CLUSTERS, "", cluster_id)
        if fc is not None:
            ctx.write(
                FOREIGN_CLUSTERS,
                dict(clone(fc), status=foreign_cluster_status(peer, ctx.local_cluster_id, up)),
                "status",
            )
        for vn in ctx.store.items(VIRTUAL_NODES):
            if (vn.get("spec") or {}).get("clusterID") != cluster_id:
                continue
            ctx.write(VIRTUAL_NODES, dict(clone(vn), status=virtual_node_status(peer, up)), "status")
            node = ctx.store.get(NODES, "", vn["metadata"]["name"])
            if node is not None:
                body = clone(node)
                status = body.get("status") or {}
                kept = [cond for cond in status.get("conditions") or [] if cond.get("type") != "Ready"]
                body["status"] = dict(status, conditions=kept + [node_ready_condition(up)])
                ctx.write(NODES, body, "status")
        return None


def _condition(ctype: str, status: str, reason: str, message: str) -> Condition:
    return {"type": ctype, "status": status, "lastTransitionTime": now_iso(), "reason": reason, "message": message}


def _network_conditions(up: bool) -> list[Condition]:
    configured = _condition(
        "NetworkConfigurationStatus",
        "Ready",
        "NetworkConfigurationReady",
        "The network configuration has been exchanged",
    )
    if up:
        connection = _condition(
            "NetworkConnectionStatus",
            "Established",
            "ConnectionEstablished",
            "The network connection with the foreign cluster is established",
        )
    else:
        connection = _condition(
            "NetworkConnectionStatus",
            "Error",
            "ConnectionError",
            "The network connection with the foreign cluster is not working",
        )
    gateway = _condition("NetworkGatewayPresence", "Established", "GatewayPresent", "The gateway is present")
    return [configured, connection, gateway]


def _offloading_conditions(healthy: bool) -> list[Condition]:
    if healthy:
        return [
            _condition("OffloadingVirtualNodeStatus", "Ready", "VirtualNodesReady", "All virtual nodes are ready"),
            _condition("OffloadingNodeStatus", "Ready", "NodesReady", "All nodes are ready"),
        ]
    return [
        _condition("OffloadingVirtualNodeStatus", "NotReady", "VirtualNodesNotReady", "No virtual nodes are ready"),
        _condition("OffloadingNodeStatus", "NotReady", "NodesNotReady", "No nodes are ready"),
    ]


def foreign_cluster_status(peer: Peer, local_cluster_id: str, up: bool = True) -> dict[str, Any]:
    """ForeignCluster.status: role, modules with their conditions, tenant namespaces, API server condition."""
    provider = peer.role in PROVIDER_ROLES
    if up:
        api = _condition("APIServerStatus", "Established", "APIServerReady", "The remote API server is ready")
    else:
        api = _condition("APIServerStatus", "Error", "APIServerNotReady", "The remote API server is not reachable")
    auth = []
    if peer.role in CONSUMER_ROLES:
        auth.append(_condition("AuthTenantStatus", "Ready", "TenantReady", "The tenant has been correctly configured"))
    if provider:
        auth.append(
            _condition(
                "AuthIdentityControlPlaneStatus", "Ready", "IdentityReady", "The identity has been correctly configured"
            )
        )
    offloading = _offloading_conditions(peer.offloading_healthy and up) if provider else []
    return {
        "role": peer.role,
        "modules": {
            "networking": {"enabled": True, "conditions": _network_conditions(up)},
            "authentication": {"enabled": True, "conditions": auth},
            "offloading": {"enabled": provider, "conditions": offloading},
        },
        "apiServerUrl": f"https://{peer.cluster_id}.liqo.example:6443",
        "tenantNamespace": {
            "local": tenant_namespace_name(peer.cluster_id),
            "remote": tenant_namespace_name(local_cluster_id),
        },
        "conditions": [api],
    }


def virtual_node_status(peer: Peer, up: bool = True) -> dict[str, Any]:
    """VirtualNode.status: Running while the peer is up and its offloading module healthy, else Creating."""
    if up and peer.offloading_healthy:
        vk = ("Running", "VirtualKubeletRunning", "The virtual kubelet is running")
        node = ("Running", "NodeRunning", "The node is running")
    else:
        vk = ("Creating", "VirtualKubeletCreating", "The virtual kubelet is not ready")
        node = ("Creating", "NodeCreating", "The node is not ready")
    return {"conditions": [_condition("VirtualKubelet", *vk), _condition("Node", *node)]}
