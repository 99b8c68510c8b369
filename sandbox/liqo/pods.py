"""Demo pods: a stand-in scheduler and kubelet that bind pending pods to nodes (a.6, e).

Where a pod may run comes from `liqo_rules`: the pod as Liqo's mutating webhook leaves it
(`mutate_pod`: the virtual-node toleration and the imposed node affinity, in namespaces with the
scheduling label) and Kubernetes node-selector matching (`selectors.match.matches`). The sandbox adds
only what a real cluster adds: taints, room (`scheduling.py`), and virtual nodes run pods once the remote
namespace is ready. A pod no node can take stays Pending with the scheduler's PodScheduled=False
condition (reason Unschedulable, "0/5 nodes are available: 4 Insufficient cpu, ...")."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

from liqo_rules import constants as c
from liqo_rules.stuckpods import REFLECTION_DISABLED
from liqo_rules.tenancy import FAILED_REFLECTION
from liqo_rules.versions import OFFLOADING_ABORTED, OFFLOADING_BACKOFF
from liqo_rules.webhook import MutationError, mutate_pod
from sandbox.apicommon import now_iso
from sandbox.kinds import NAMESPACE_OFFLOADINGS, NAMESPACES, NODES, PODS
from sandbox.liqo import resources
from sandbox.liqo.context import LiqoContext, is_virtual_node
from sandbox.liqo.events import record_event
from sandbox.liqo.scheduling import RESOURCES, misfit, requests, unschedulable_message
from sandbox.objects import Obj, clone


class PodController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx
        # What the bound pods request per node, valid at one store revision: binding thousands of pods
        # (a generated fleet with pods) would otherwise sum every pod again for every namespace.
        self._used_at: tuple[int, dict[str, dict[str, Decimal]]] | None = None

    def reconcile(self, namespace: str) -> float | None:
        """Bind pending pods to the nodes they may run on (local, or virtual where the namespace is ready)."""
        store, server = self.ctx.store, self.ctx.server
        nsoff = store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        self._virtual_kubelets(namespace, nsoff)
        pending = [
            p
            for p in store.items(PODS, namespace)
            if not (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]
        if not pending:
            return None
        webhook_spec = self._webhook_spec(namespace, nsoff)
        nodes = self._nodes(_ready_clusters(nsoff))
        before, writes = store.revision, 0
        used = self._used(before)
        for pod in pending:
            admitted = _as_admitted(pod, webhook_spec)
            why = {name: misfit(admitted, node, used.get(name)) for name, node in nodes.items()}
            candidates = [name for name, reason in why.items() if reason is None]
            if not candidates:
                writes += self._unschedulable(pod, [reason for reason in why.values() if reason])
                continue
            node_name = candidates[_digest(pod) % len(candidates)]
            room = used.setdefault(node_name, dict.fromkeys(RESOURCES, Decimal(0)))
            for resource, amount in requests(pod).items():
                room[resource] += amount
            body = clone(pod)
            body["spec"]["nodeName"] = node_name
            on_virtual = is_virtual_node(nodes[node_name])
            if on_virtual:
                body["metadata"].setdefault("labels", {})[c.SHADOW_POD_LABEL] = "true"
            bound = server.update(PODS, namespace, pod["metadata"]["name"], body, manager="kube-scheduler").obj
            cluster_id = _cluster_of(nodes[node_name])
            denial = resources.refusal(self.ctx, cluster_id, admitted) if on_virtual else ""
            if denial:  # the provider's ShadowPod webhook refuses it: bound, Pending, a FailedReflection Warning
                record_event(
                    self.ctx,
                    bound,
                    "Warning",
                    FAILED_REFLECTION,
                    resources.failed_reflection_message(cluster_id, denial),
                )
                held = clone(bound)
                held["status"] = {
                    "phase": "Pending",
                    "qosClass": "Burstable",
                    "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now_iso()}],
                }
                server.update(PODS, namespace, pod["metadata"]["name"], held, manager="kubelet", subresource="status")
                writes += 3
                continue
            fresh = clone(bound)
            fresh["status"] = running_pod_status(fresh, on_virtual)
            server.update(PODS, namespace, pod["metadata"]["name"], fresh, manager="kubelet", subresource="status")
            writes += 2
        # The sums followed this loop's own bindings: still exact if nobody else wrote meanwhile.
        self._used_at = (store.revision, used) if store.revision == before + writes else None
        return None

    def _virtual_kubelets(self, namespace: str, nsoff: Obj | None) -> None:
        """What each virtual kubelet does with the pods bound to its node (reflection/workload/pod.go): a
        new pod (created with its nodeName, as a DaemonSet's) runs when the namespace is offloaded and ready
        there; where reflection is disabled (the namespace is not offloaded there) a pod that has not started
        is marked Pending / OffloadingBackOff and a running one Failed / OffloadingAborted, each with a
        Warning ReflectionDisabled Event."""
        virtual = {
            node["metadata"]["name"]: _cluster_of(node) for node in self.ctx.store.items(NODES) if is_virtual_node(node)
        }
        ready, selected = _ready_clusters(nsoff), _selected_clusters(nsoff)
        for pod in self.ctx.store.items(PODS, namespace):
            node = (pod.get("spec") or {}).get("nodeName") or ""
            status = pod.get("status") or {}
            if node and node not in virtual and not status.get("phase"):  # created bound to a local node
                fresh = clone(pod)
                fresh["status"] = running_pod_status(fresh, False)
                self.ctx.server.update(
                    PODS, namespace, pod["metadata"]["name"], fresh, manager="kubelet", subresource="status"
                )
                continue
            if node not in virtual or pod["metadata"].get("deletionTimestamp") or status.get("reason"):
                continue
            cluster_id, phase = virtual[node], status.get("phase") or ""
            if self.ctx.faults.peer_is_down(cluster_id):
                continue
            if not phase and cluster_id in ready:
                fresh = clone(pod)
                fresh["status"] = running_pod_status(fresh, True)
                self.ctx.server.update(
                    PODS, namespace, pod["metadata"]["name"], fresh, manager="kubelet", subresource="status"
                )
            elif cluster_id not in selected and phase in ("", "Pending", "Running"):
                started = phase == "Running"
                fresh = clone(pod)
                fresh["status"] = {
                    **status,
                    "phase": "Failed" if started else "Pending",
                    "reason": OFFLOADING_ABORTED if started else OFFLOADING_BACKOFF,
                }
                updated = self.ctx.server.update(
                    PODS,
                    namespace,
                    pod["metadata"]["name"],
                    fresh,
                    manager="liqo-virtual-kubelet",
                    subresource="status",
                ).obj
                record_event(
                    self.ctx, updated, "Warning", REFLECTION_DISABLED, _reflection_disabled(cluster_id, namespace)
                )

    def _used(self, revision: int) -> dict[str, dict[str, Decimal]]:
        """What the pods bound to each node request, by node name (the store is at ``revision`` or later)."""
        if self._used_at is not None and self._used_at[0] == revision:
            return self._used_at[1]
        used: dict[str, dict[str, Decimal]] = {}
        for pod in self.ctx.store.items(PODS):
            node = (pod.get("spec") or {}).get("nodeName")
            if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                room = used.setdefault(node, dict.fromkeys(RESOURCES, Decimal(0)))
                for resource, amount in requests(pod).items():
                    room[resource] += amount
        return used

    def _unschedulable(self, pod: Obj, reasons: list[str]) -> int:
        """Record why no node takes the pod, as kube-scheduler does (only when that changed); the writes made."""
        message = unschedulable_message(reasons)
        status = pod.get("status") or {}
        if any(
            cd.get("type") == "PodScheduled" and cd.get("message") == message for cd in status.get("conditions") or []
        ):
            return 0
        body = clone(pod)
        body["status"] = {
            "phase": "Pending",
            "qosClass": status.get("qosClass", "BestEffort"),
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": now_iso(),
                }
            ],
        }
        meta = pod["metadata"]
        self.ctx.server.update(
            PODS, meta["namespace"], meta["name"], body, manager="kube-scheduler", subresource="status"
        )
        return 1

    def _webhook_spec(self, namespace: str, nsoff: Obj | None) -> dict[str, Any] | None:
        """The NamespaceOffloading spec Liqo's pod webhook applies, or None where it does not act
        (no NamespaceOffloading, or the namespace lacks the scheduling label)."""
        ns = self.ctx.store.get(NAMESPACES, "", namespace)
        labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
        if nsoff is None or labels.get(c.SCHEDULING_LABEL) != "true":
            return None
        return nsoff.get("spec") or {}

    def _nodes(self, ready_clusters: set[str]) -> dict[str, Obj]:
        """Local nodes, then virtual nodes of reachable clusters in `ready_clusters`, by name."""
        local, virtual = {}, {}
        for node in self.ctx.store.items(NODES):
            if not is_virtual_node(node):
                local[node["metadata"]["name"]] = node
                continue
            cluster_id = (node["metadata"].get("labels") or {}).get(c.REMOTE_CLUSTER_ID_LABEL, "")
            if cluster_id in ready_clusters and not self.ctx.faults.peer_is_down(cluster_id):
                virtual[node["metadata"]["name"]] = node
        return {**local, **virtual}


def _as_admitted(pod: Obj, webhook_spec: dict[str, Any] | None) -> Obj:
    """The pod as Liqo's mutating webhook would have admitted it (unchanged where the webhook does not act)."""
    if webhook_spec is None:
        return pod
    try:
        return mutate_pod(webhook_spec, pod)
    except MutationError:
        return pod


def _ready_clusters(nsoff: Obj | None) -> set[str]:
    conditions = ((nsoff or {}).get("status") or {}).get("remoteNamespacesConditions") or {}
    return {
        cluster_id
        for cluster_id, conds in conditions.items()
        if any(cd.get("type") == c.CONDITION_READY and cd.get("status") == "True" for cd in conds)
    }


def _selected_clusters(nsoff: Obj | None) -> set[str]:
    conditions = ((nsoff or {}).get("status") or {}).get("remoteNamespacesConditions") or {}
    return {
        cluster_id
        for cluster_id, conds in conditions.items()
        if any(cd.get("type") == c.CONDITION_OFFLOADING_REQUIRED and cd.get("status") == "True" for cd in conds)
    }


def _cluster_of(node: Obj) -> str:
    return str((node["metadata"].get("labels") or {}).get(c.REMOTE_CLUSTER_ID_LABEL) or "")


def _reflection_disabled(cluster_id: str, namespace: str) -> str:
    """forge.EventReflectionDisabledMsg, paraphrased with the same advice and the same label."""
    return (
        f'Reflection to cluster "{cluster_id}" disabled for namespace "{namespace}". If this is a DaemonSet '
        "scheduling pods in all the nodes across the cluster, you might want to prevent scheduling on Liqo "
        "Virtual Nodes: configure spec.template.spec.affinity.nodeAffinity so that the pods are not scheduled "
        f"on Nodes having the label {c.VIRTUAL_NODE_TYPE_LABEL}={c.VIRTUAL_NODE_TYPE_VALUE}."
    )


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
