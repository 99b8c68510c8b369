"""Scenario files: the fleet a sandbox starts with (local cluster, nodes, peers, namespaces, offloadings).

A scenario is YAML (see scenarios/demo.yaml for every field). `--scenario` takes a built-in name
(scenarios/<name>.yaml), a file path, `generated:NxK` (`fleet.generate(N, K)`, no file) or, in-process, a
dict; `sandbox.fleet.generate()` builds the large fleets for benchmarks.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import yaml

from liqo_rules import constants as c
from liqo_rules.peers import PROVIDER_ROLES, ROLE_PROVIDER, tenant_namespace_name
from liqo_rules.selectors.liqoctl import cluster_selector
from sandbox import tenants
from sandbox.apicommon import now_iso
from sandbox.apiserver import ApiServer
from sandbox.fleet import generate
from sandbox.kinds import FOREIGN_CLUSTERS, NAMESPACE_OFFLOADINGS, NAMESPACES, NODES, PODS, VIRTUAL_NODES
from sandbox.liqo import LiqoSimulation, Peer, resources
from sandbox.liqo.context import SELECT_PHASE, STATUS_PHASE
from sandbox.objects import clone
from sandbox.runtime import Controller

BUILTIN_DIR = Path(__file__).with_name("scenarios")
GENERATED = "generated:"
# The namespaces of a fresh cluster with Liqo installed (on the local cluster and on every peer).
SYSTEM_NAMESPACES = ("default", *c.KUBERNETES_SYSTEM_NAMESPACES, c.LIQO_NAMESPACE)


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def load(scenario: str | Path | dict[str, Any]) -> dict[str, Any]:
    if isinstance(scenario, dict):
        return clone(scenario)
    if str(scenario).startswith(GENERATED):
        fleet = generated(str(scenario)[len(GENERATED) :])
        if fleet is not None:
            return fleet
    path = Path(scenario)
    if not path.exists() and (BUILTIN_DIR / f"{scenario}.yaml").exists():
        path = BUILTIN_DIR / f"{scenario}.yaml"
    if not path.exists():
        raise FileNotFoundError(
            f"scenario {scenario!r} is neither a file nor a built-in scenario ({', '.join(builtin_names())})"
        )
    data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(data, dict):
        raise ValueError(f"scenario {path} is not a YAML mapping")
    return data


def generated(text: str, local_id: str = "rome") -> dict[str, Any] | None:
    """``NxK``, ``NxK@F~E+P`` (what follows ``generated:``) as a generated fleet; None if it is not that form.
    10000x200: namespaces x peers; @0.6: 60 % offloaded; ~0.9: 90 % of those on every peer; +2: 2 pods each."""
    share = r"(0(?:\.\d+)?|1(?:\.0*)?)"
    found = re.fullmatch(rf"(\d+)x(\d+)(?:@{share})?(?:~{share})?(?:\+(\d+))?", text)
    if not found:
        return None
    fraction, everywhere = (float(found.group(n)) if found.group(n) else None for n in (3, 4))
    return generate(
        int(found.group(1)),
        int(found.group(2)),
        offloaded=0.1 if fraction is None else fraction,
        everywhere=everywhere or 0.0,
        pods=int(found.group(5) or 0),
        local_id=local_id,
    )


def local_cluster_id(data: dict[str, Any]) -> str:
    return str((data.get("localCluster") or {}).get("id") or "local")


def apply(data: dict[str, Any], server: ApiServer, sim: LiqoSimulation, *, namespaces: bool = True) -> None:
    """Create the scenario's objects through the API server (the simulated controllers then converge);
    with namespaces=False, only the cluster and its peers (then `apply_namespaces`)."""
    sim.local_cluster_id = local_cluster_id(data)
    for name in SYSTEM_NAMESPACES:
        server.create(NAMESPACES, "", {"metadata": {"name": name}}, manager="kube-apiserver")
    for node in data.get("localNodes") or []:
        server.create(NODES, "", local_node(node), manager="kubelet")
    resources.apply_version(data, server)
    for peer_data in data.get("peers") or []:
        _apply_peer(peer_data, server, sim)
        resources.apply_peer(peer_data, server, sim)
    if namespaces:
        apply_namespaces(data, server)


def apply_namespaces(data: dict[str, Any], server: ApiServer) -> None:
    for ns in data.get("namespaces") or []:
        _apply_namespace(ns, server)


def converge(data: dict[str, Any], server: ApiServer, liqo: LiqoSimulation, controller: Controller) -> None:
    """Apply the scenario and converge it in phases (a fleet of thousands starts in seconds): the
    offloadings select their clusters, one desiredMapping patch per map, the providers answer, then
    every offloading writes its status once."""
    liqo.bulk_phase = SELECT_PHASE
    try:
        apply(data, server, liqo, namespaces=False)
        controller.drain(horizon=1.0)  # peers and virtual nodes first, so offloadings select once
        liqo.offloadings_stale = False
        apply_namespaces(data, server)
        controller.drain(horizon=1.0)
        if liqo.offloadings_stale:  # a VirtualNode changed after some offloadings had selected
            liqo.offloadings_stale = False
            liqo.enqueue_offloadings(0.0)
            controller.drain(horizon=1.0)
        liqo.flush_desired()
        for cluster_id in liqo.local_namespace_maps():
            liqo.enqueue_provider(cluster_id)
        controller.drain(horizon=1.0)
        liqo.bulk_phase = STATUS_PHASE
        liqo.enqueue_offloadings(0.0)
        controller.drain(horizon=1.0)
    finally:
        liqo.bulk_phase = None
        liqo.offloadings_stale = False


def apply_pods(data: dict[str, Any], server: ApiServer) -> None:
    """The demo pods, created once the offloadings converged so that some land on virtual nodes."""
    for ns in data.get("namespaces") or []:
        _apply_pods(ns, server)
        _apply_extra_pods(ns, server)


def local_node(node: dict[str, Any]) -> dict[str, Any]:
    name = node["name"]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }
    for role in node.get("roles") or []:
        labels[f"node-role.kubernetes.io/{role}"] = ""
    labels.update(node.get("labels") or {})
    capacity = {k: str(v) for k, v in (node.get("capacity") or {"cpu": "8", "memory": "32Gi", "pods": "110"}).items()}
    now = now_iso()
    spec: dict[str, Any] = {"podCIDR": node.get("podCIDR", "10.244.0.0/24")}
    if "control-plane" in (node.get("roles") or []):
        spec["taints"] = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": node.get("address", "192.168.10.10")},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.35.2",
                "osImage": "Debian GNU/Linux 13 (trixie)",
                "architecture": "amd64",
                "operatingSystem": "linux",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kernelVersion": "6.12.0",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        },
    }


def _apply_peer(data: dict[str, Any], server: ApiServer, sim: LiqoSimulation) -> None:
    cluster_id = data["id"]
    peer = Peer(
        cluster_id,
        role=data.get("role", ROLE_PROVIDER),
        namespace_delay=float(data.get("namespaceDelay", 0)),
        offloading_healthy=bool(data.get("offloadingHealthy", True)),
    )
    sim.peers[cluster_id] = peer
    for name in list(SYSTEM_NAMESPACES) + list(data.get("existingNamespaces") or []):
        peer.store.create(
            NAMESPACES,
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": name,
                    "creationTimestamp": now_iso(),
                    "labels": {"kubernetes.io/metadata.name": name},
                },
                "status": {"phase": "Active"},
            },
        )
    tenant = tenant_namespace_name(cluster_id)
    server.create(
        NAMESPACES,
        "",
        {
            "metadata": {
                "name": tenant,
                "labels": {c.TENANT_NAMESPACE_LABEL: "true", c.REMOTE_CLUSTER_ID_LABEL: cluster_id},
            }
        },
        manager=c.CONTROLLER_MANAGER,
    )
    fc = server.create(
        FOREIGN_CLUSTERS,
        "",
        {
            "apiVersion": "core.liqo.io/v1beta1",
            "kind": "ForeignCluster",
            "metadata": {"name": cluster_id, "labels": {c.REMOTE_CLUSTER_ID_LABEL: cluster_id}},
            "spec": {"clusterID": cluster_id},
        },
        manager=c.CONTROLLER_MANAGER,
    ).obj
    body = clone(fc)
    body["status"] = sim.foreign_cluster_status(peer)
    server.update(FOREIGN_CLUSTERS, "", cluster_id, body, manager=c.CONTROLLER_MANAGER, subresource="status")
    for entry in data.get("offloadsHere") or []:  # a consumer's namespaces: their twins here (tenants.py)
        tenants.offload_here(server, sim, cluster_id, *tenants.entry_spec(entry))
    if peer.role not in PROVIDER_ROLES:
        return
    count = int(data.get("virtualNodes", 1))
    for index in range(count):
        name = cluster_id if count == 1 else f"{cluster_id}-{index + 1}"
        storage = data.get("storageClasses")
        spec: dict[str, Any] = {
            "clusterID": cluster_id,
            "createNode": bool(data.get("createNode", True)),
            "disableNetworkCheck": False,
            "labels": {c.REMOTE_CLUSTER_ID_LABEL: cluster_id, **(data.get("labels") or {})},
            "resourceQuota": {
                "hard": {
                    k: str(v)
                    for k, v in (data.get("resources") or {"cpu": "16", "memory": "64Gi", "pods": "200"}).items()
                }
            },
            "kubeconfigSecretRef": {"name": f"kubeconfig-resourceslice-{name}"},
            "offloadingPatch": {},
        }
        if storage:
            spec["storageClasses"] = [{"storageClassName": s, "default": i == 0} for i, s in enumerate(storage)]
        vn = server.create(
            VIRTUAL_NODES,
            tenant,
            {
                "apiVersion": f"{c.GROUP}/{c.VERSION}",
                "kind": "VirtualNode",
                "metadata": {
                    "name": name,
                    "namespace": tenant,
                    "labels": {c.REMOTE_CLUSTER_ID_LABEL: cluster_id, c.RESOURCESLICE_LABEL: name},
                },
                "spec": spec,
            },
            manager=c.CONTROLLER_MANAGER,
        ).obj
        body = clone(vn)
        body["status"] = sim.virtual_node_status(peer)
        server.update(VIRTUAL_NODES, tenant, name, body, manager=c.CONTROLLER_MANAGER, subresource="status")


def _apply_namespace(data: dict[str, Any], server: ApiServer) -> None:
    name = data["name"]
    meta: dict[str, Any] = {"name": name, "labels": dict(data.get("labels") or {})}
    if data.get("annotations"):
        meta["annotations"] = dict(data["annotations"])
    server.create(NAMESPACES, "", {"metadata": meta}, manager="kubectl-create")
    offloading = data.get("offloading")
    if offloading is not None:
        spec = {k: v for k, v in (offloading or {}).items() if k not in ("selector", "manager")}
        if "selector" in (offloading or {}):
            spec["clusterSelector"] = cluster_selector(list(offloading["selector"] or []))
        spec.setdefault("clusterSelector", {"nodeSelectorTerms": []})
        server.create(
            NAMESPACE_OFFLOADINGS,
            name,
            {
                "apiVersion": f"{c.GROUP}/{c.VERSION}",
                "kind": "NamespaceOffloading",
                "metadata": {"name": c.OFFLOADING_NAME, "namespace": name},
                "spec": spec,
            },
            manager=(offloading or {}).get("manager", "liqoctl"),
        )


def _apply_pods(data: dict[str, Any], server: ApiServer) -> None:
    name = data["name"]
    requests = {k: str(v) for k, v in (data.get("requests") or {}).items()}  # per pod, e.g. {cpu: 250m}
    for index in range(int(data.get("pods", 0))):
        app = data.get("app", name)
        container: dict[str, Any] = {"name": app, "image": data.get("image", "nginx:1.27")}
        if requests:
            container["resources"] = {"requests": dict(requests)}
        server.create(
            PODS,
            name,
            {
                "metadata": {"name": f"{app}-{_pod_suffix(name, index)}", "namespace": name, "labels": {"app": app}},
                "spec": {
                    "containers": [container],
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "serviceAccountName": "default",
                },
            },
            manager="kube-controller-manager",
        )


def _apply_extra_pods(data: dict[str, Any], server: ApiServer) -> None:
    """``extraPods``: pods as a controller or a user makes them: ``{name, nodeName (bound already, as a
    DaemonSet's), ownerKind, ownerName, requests, limits, affinity (a required NodeSelector)}``."""
    name = data["name"]
    for pod in data.get("extraPods") or []:
        container: dict[str, Any] = {"name": "app", "image": pod.get("image", "nginx:1.27")}
        resources_ = {
            k: {r: str(v) for r, v in (pod.get(k) or {}).items()} for k in ("requests", "limits") if pod.get(k)
        }
        if resources_:
            container["resources"] = resources_
        meta: dict[str, Any] = {
            "name": pod["name"],
            "namespace": name,
            "labels": {"app": pod.get("ownerName", pod["name"])},
        }
        if pod.get("ownerKind"):
            meta["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": pod["ownerKind"],
                    "name": pod.get("ownerName", ""),
                    "uid": pod.get("ownerName", ""),
                    "controller": True,
                }
            ]
        spec: dict[str, Any] = {
            "containers": [container],
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
        }
        if pod.get("nodeName"):
            spec["nodeName"] = pod["nodeName"]
        if pod.get("affinity"):
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pod["affinity"]}}
        if pod.get("tolerations"):
            spec["tolerations"] = pod["tolerations"]
        server.create(PODS, name, {"metadata": meta, "spec": spec}, manager="kube-controller-manager")


def _pod_suffix(namespace: str, index: int) -> str:
    rnd = random.Random(f"{namespace}-{index}")
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(rnd.choice(alphabet) for _ in range(10))[:5] + "-" + "".join(rnd.choice(alphabet) for _ in range(5))
