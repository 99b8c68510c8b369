"""Pods Liqo leaves stuck, with the fix (liqo-semantics.md j.3), and DaemonSet pods on virtual nodes.

* ``OffloadingBackOff`` (Pending): a virtual node's kubelet rejected the pod before offloading started,
  because reflection is disabled for its namespace on that cluster (the namespace is not offloaded
  there); it records the Warning Event ``ReflectionDisabled``. Reflected once the namespace is offloaded
  there (liqotech/liqo#3296).
* ``OffloadingAborted`` (Failed): the same, for a pod that had started: the namespace lost that cluster.
  Never offloaded again: its controller recreates it, a bare pod must be recreated by hand.
* ``RemotePodTerminated`` (Failed, v1.2.0 and later): its remote pod ended but the status was not
  reflected; nothing to fix.
* Pending and Unschedulable on the virtual-node taint: the pod was created before Liqo's pod webhook
  acted in its namespace (no offloading yet, or no ``liqo.io/scheduling-enabled`` label) and asks for a
  virtual node without tolerating it (liqotech/liqo#924). The webhook mutates pods only at creation:
  pre-label the namespace and recreate the pods.
* A Warning ``FailedReflection`` with ``user is cordoned`` / ``quota usage exceeded``: the provider
  refused the pod (liqo_rules.tenancy).
* A DaemonSet's pod bound to a virtual node (liqotech/liqo#1398): keep the DaemonSet local with a
  required node affinity ``liqo.io/type NotIn [virtual-node]`` (what the ReflectionDisabled message asks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from liqo_rules import constants as c
from liqo_rules.tenancy import refusal_of
from liqo_rules.versions import OFFLOADING_ABORTED, OFFLOADING_BACKOFF, REMOTE_POD_TERMINATED

REFLECTION_DISABLED = "ReflectionDisabled"


@dataclass(frozen=True)
class PodFacts:
    """What the classification reads of one pod."""

    name: str
    phase: str
    reason: str  # status.reason, or for a Pending pod "<condition reason>: <message>"
    cluster_id: str  # the peer of the (virtual) node it is bound to; "" local or unbound
    owner_kind: str = ""
    owner_name: str = ""
    failed_reflection: str = ""  # the message of its latest FailedReflection Warning, if any


@dataclass(frozen=True)
class StuckPod:
    name: str
    kind: str  # backoff | aborted | terminated | webhook-missed | refused | daemonset
    explanation: str
    fix: str


def _recreate(pod: PodFacts) -> str:
    if pod.owner_kind:
        return f"delete it: its {pod.owner_kind} {pod.owner_name} creates a new one"
    return "delete and create it again (a bare pod has no controller to recreate it)"


def classify(pod: PodFacts, namespace: str, offloaded: bool, labelled: bool) -> StuckPod | None:
    """Why ``pod`` is stuck and what fixes it (None: it is not stuck). ``offloaded``: the namespace has
    a NamespaceOffloading; ``labelled``: it carries ``liqo.io/scheduling-enabled=true``."""
    where = f" on {pod.cluster_id}" if pod.cluster_id else ""
    if pod.owner_kind == "DaemonSet" and pod.cluster_id:
        return StuckPod(
            pod.name,
            "daemonset",
            f"a pod of DaemonSet {pod.owner_name} was placed on the virtual node of {pod.cluster_id}: "
            "a DaemonSet runs a pod on every node, virtual nodes included (liqotech/liqo#1398)",
            f"keep the DaemonSet local: {daemonset_patch_command(namespace, pod.owner_name)}",
        )
    if pod.reason == OFFLOADING_BACKOFF:
        return StuckPod(
            pod.name,
            "backoff",
            f"Pending{where}: Liqo's virtual kubelet rejected it ({REFLECTION_DISABLED}): the namespace is "
            f"not offloaded {'to that cluster' if offloaded else 'at all'}",
            (
                f"offload {namespace} to {pod.cluster_id or 'that cluster'} (its selector must match it)"
                if offloaded
                else f"offload {namespace} ({offload_hint(namespace)})"
            )
            + "; the pod is offloaded once the namespace is there, or pin it to local nodes",
        )
    if pod.reason == OFFLOADING_ABORTED:
        return StuckPod(
            pod.name,
            "aborted",
            f"Failed{where}: the namespace lost that cluster while the pod ran there (OffloadingAborted); "
            "Liqo never offloads it again",
            _recreate(pod),
        )
    if pod.reason == REMOTE_POD_TERMINATED:
        return StuckPod(
            pod.name,
            "terminated",
            f"ended{where}: its remote pod completed but the final status was not reflected (RemotePodTerminated)",
            "nothing to fix; delete it when its logs are no longer needed",
        )
    refusal = refusal_of(pod.failed_reflection)
    if pod.phase == "Pending" and refusal:
        what = "this cluster's tenant is cordoned there" if refusal == "cordoned" else "it is over the quota there"
        return StuckPod(
            pod.name,
            "refused",
            f"Pending{where}: the provider refused it, {what} ({pod.failed_reflection})",
            "ask the provider to uncordon the tenant (liqoctl uncordon tenant)"
            if refusal == "cordoned"
            else "lower the pod's requests, free room in the quota, or ask the provider for a larger ResourceSlice",
        )
    if pod.phase == "Pending" and c.VIRTUAL_NODE_TAINT_KEY in pod.reason:
        label = f"kubectl label namespace {namespace} {c.SCHEDULING_LABEL}=true"
        first = "" if labelled else f"label the namespace first ({label}), then "
        return StuckPod(
            pod.name,
            "webhook-missed",
            "Pending: it asks for a virtual node but does not tolerate the virtual-node taint: it was created "
            f"before Liqo's pod webhook acted in {namespace} "
            + ("(the namespace was offloaded after it)" if offloaded else "(the namespace is not offloaded)"),
            (f"offload {namespace}, " if not offloaded else "")
            + f"{first}recreate the pod: the webhook adds the toleration only at creation "
            "(liqotech/liqo#924: pre-label namespaces that will be offloaded)",
        )
    return None


def offload_hint(namespace: str) -> str:
    return f"liqoctl offload namespace {namespace}"


AFFINITY_PATCH: dict[str, object] = {
    "spec": {
        "template": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": c.VIRTUAL_NODE_TYPE_LABEL,
                                            "operator": "NotIn",
                                            "values": [c.VIRTUAL_NODE_TYPE_VALUE],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                }
            }
        }
    }
}


def daemonset_patch_command(namespace: str, name: str) -> str:
    """The kubectl patch that keeps a DaemonSet off virtual nodes. A merge patch replaces the list of
    required ``nodeSelectorTerms``: a DaemonSet with terms of its own must add the expression to each."""
    patch = json.dumps(AFFINITY_PATCH, separators=(",", ":"))
    return f"kubectl -n {namespace} patch daemonset {name} --type merge -p '{patch}'"
