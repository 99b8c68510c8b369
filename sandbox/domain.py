"""A sandbox domain: several sandbox clusters in one process, each with its own API endpoint (its own
port) and its own kubeconfig context, peered with one another as Liqo peers them.

Each cluster is a whole `Sandbox` started from a scenario built here: its own nodes and namespaces,
and a peer (ForeignCluster, VirtualNodes, NamespaceMap) for every other cluster of the domain, with
the role the domain gives it (a mesh: every cluster consumes and provides, except provider-only
clusters, which consume nothing). Once all are started they are linked: the simulated provider side
of cluster A's peer B writes into B's own store, so an offload from A to B creates the twin namespace
in B's API (named by Liqo's mapping strategy, labelled ``liqo.io/remote-cluster-id=A``, annotated with
A's NamespaceMap as replicated in B, ``liqo-tenant-A/B``), and deleting the offloading removes it. A
cluster whose API is out (the ``outage`` fault) is unreachable for the others: their ForeignCluster,
VirtualNodes and Nodes for it turn not ready and nothing converges there until it is back.

Scenarios (``--scenario``):

* ``domain:rome,milan,naples``: these clusters, each with generated demo namespaces (some offloaded);
  ``name:provider`` makes a cluster provider-only (``domain:rome,milan,turin:provider``);
* ``domain:3``: that many clusters, named rome, milan, naples, turin, ... (``cluster-11`` past ten);
* either followed by ``/NxK@F~E+P`` (``domain:10/1000x20``): in every cluster a generated fleet
  (``generated:`` of a single sandbox: N namespaces, K simulated peers besides the domain) in place of
  the demo namespaces, for benchmarks;
* a YAML file (or, in-process, a dict) with a top-level ``domain:`` mapping, see
  ``scenarios/domains/italy.yaml``.
"""

from __future__ import annotations

import socket
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from liqo_rules import constants as c
from liqo_rules.peers import tenant_namespace_name
from sandbox import persistence
from sandbox.domainspec import (  # noqa: F401 - the spec, re-exported for the domain's users
    CLUSTER_KEYS,
    COMPUTED_KEYS,
    MAX_CLUSTERS,
    NAMES,
    PREFIX,
    PROVIDER_ONLY,
    PROVIDERS,
    REGION_LABEL,
    REGIONS,
    ClusterSpec,
    DomainSpec,
    cluster_scenario,
    demo_namespaces,
    from_data,
    generated_fleet,
    is_domain,
    labels_of,
    load,
    namespaces_of,
    parse,
    role_of,
    state_path,
)
from sandbox.errors import ApiError
from sandbox.faults import FaultSettings
from sandbox.kinds import CONFIG_MAPS, NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS, NODES, PODS, Kind
from sandbox.liqo.context import is_virtual_node
from sandbox.objects import Obj, clone
from sandbox.rbac import ADMIN_USER
from sandbox.server import Sandbox


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


# Liqo's ConfigMap with the cluster's id, as its Helm chart installs it (liqoctl info reads it by its label).
CLUSTER_ID_CONFIG_MAP = "liqo-clusterid-configmap"
CLUSTER_ID_CONFIG_MAP_LABELS = {"app.kubernetes.io/name": "clusterid-configmap"}


def _cluster_id_config_map(sb: Sandbox, cluster_id: str) -> None:
    """A domain's cluster says its id as a Liqo install does (a single sandbox leaves it to its peers'
    tenant namespaces, so that both ways of finding it stay tested)."""
    if sb.store.get(CONFIG_MAPS, c.LIQO_NAMESPACE, CLUSTER_ID_CONFIG_MAP) is not None:
        return  # restored from its state file
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CLUSTER_ID_CONFIG_MAP, "labels": dict(CLUSTER_ID_CONFIG_MAP_LABELS)},
        "data": {"CLUSTER_ID": cluster_id},
    }
    sb.server.create(CONFIG_MAPS, c.LIQO_NAMESPACE, body, manager="helm")


class Domain:
    """Several sandbox clusters peered with one another.

    with Domain("domain:rome,milan,naples", port=0) as d: d["milan"].url; d.write_kubeconfig(path)
    """

    def __init__(
        self,
        scenario: str | Path | dict[str, Any] | DomainSpec,
        *,
        controller_delay: float = 0.0,
        port: int = 0,
        host: str = "127.0.0.1",
        rbac: str | Path | dict[str, Any] | None = None,
        state_file: str | Path | None = None,
    ) -> None:
        self.spec = scenario if isinstance(scenario, DomainSpec) else load(scenario)
        self.clusters: dict[str, Sandbox] = {}
        namespaces = {cluster.name: namespaces_of(self.spec, cluster) for cluster in self.spec.clusters}
        for index, cluster in enumerate(self.spec.clusters):
            if cluster.port is not None:
                cluster_port = cluster.port
            elif not port or index == 0:
                cluster_port = port
            else:  # the next ports after --port, or a free one where one is taken
                cluster_port = port + index if _port_is_free(host, port + index) else 0
            self.clusters[cluster.name] = Sandbox(
                scenario=cluster_scenario(self.spec, cluster, namespaces),
                controller_delay=controller_delay,
                port=cluster_port,
                host=host,
                rbac=rbac,
                state_file=state_path(state_file, cluster.name) if state_file else None,
            )
        self._lock = threading.Lock()
        self._outage: dict[str, bool] = dict.fromkeys(self.clusters, False)
        self.reflections: dict[str, PodReflection] = {}
        self.started = False

    def __getitem__(self, name: str) -> Sandbox:
        return self.clusters[name]

    def names(self) -> list[str]:
        return list(self.clusters)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, timeout: float = 300.0) -> Domain:
        """Start every cluster, link them, and return once the offloadings between them converged."""
        if self.started:
            return self
        started: list[Sandbox] = []
        try:
            for sb in self.clusters.values():
                started.append(sb.start())
            self.started = True
            delays = {name: sb.liqo.controller_delay for name, sb in self.clusters.items()}
            for sb in self.clusters.values():
                sb.liqo.controller_delay = 0.0  # the initial domain converges at once, as a cluster does
            self._link()
            self.wait_idle(timeout)
            for name, sb in self.clusters.items():
                sb.liqo.controller_delay = delays[name]
        except BaseException:
            for sb in started:
                sb.stop()
            self.started = False
            raise
        return self

    def _link(self) -> None:
        for name, sb in self.clusters.items():
            for peer_id, peer in sb.liqo.peers.items():
                other = self.clusters.get(peer_id)
                if other is None:
                    continue
                # Our NamespaceMap for the peer, as replicated there: in its tenant namespace for us.
                peer.map_ref = f"{tenant_namespace_name(name)}/{peer_id}"
                peer.finalizes_namespaces = True
                peer.store = other.store
                sb.liqo.enqueue_provider(peer_id)
            _cluster_id_config_map(sb, name)
            reflection = PodReflection(self, name)
            self.reflections[name] = reflection
            reflection.resync()
            sb.faults.add_listener(partial(self._faults_changed, name))
            sb.api.admin_hooks["domain"] = partial(self.endpoint, name)

    def stop(self) -> None:
        for sb in self.clusters.values():
            sb.stop()
        self.started = False

    def __enter__(self) -> Domain:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Return once no cluster's simulated controllers have work left, including the work one cluster
        gives another (a twin namespace created in a peer); TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            before = [sb.store.revision for sb in self.clusters.values()]
            for sb in self.clusters.values():
                sb.wait_idle(max(0.05, deadline - time.monotonic()))
            if [sb.store.revision for sb in self.clusters.values()] == before:
                return True
            if time.monotonic() > deadline:
                raise TimeoutError(f"the sandbox domain is still busy after {timeout}s")

    # -- faults across the domain ------------------------------------------------------------------
    def _faults_changed(self, name: str, settings: FaultSettings) -> None:
        """A cluster whose API is out is unreachable for its peers (as `peer_down` there, kept apart)."""
        reflection = self.reflections.get(name)
        if reflection is not None:
            reflection.resync()  # a peer back (peer_down cleared): its pods are reflected again
        outage = settings.outage
        with self._lock:
            if self._outage.get(name) == outage:
                return
            self._outage[name] = outage
            out = {cluster for cluster, down in self._outage.items() if down}
        for other, sb in self.clusters.items():
            sb.faults.set_unreachable({cluster for cluster in out if cluster != other and cluster in sb.liqo.peers})

    def describe(self, asked_from: str | None = None) -> dict[str, Any]:
        """What ``GET /sandbox/domain`` answers: every cluster with its URL, context, roles and faults."""
        by_name = {cluster.name: cluster for cluster in self.spec.clusters}
        clusters = []
        for name, sb in self.clusters.items():
            clusters.append(
                {
                    "name": name,
                    "context": name,
                    "url": sb.url if sb.started else None,
                    "providerOnly": by_name[name].provider_only,
                    "peers": {peer_id: peer.role for peer_id, peer in sorted(sb.liqo.peers.items())},
                    "faults": sb.faults.as_dict(),
                    "unreachablePeers": sorted(sb.faults.unreachable()),
                }
            )
        return {"cluster": asked_from, "clusters": clusters}

    def endpoint(self, asked_from: str, method: str, payload: Any) -> tuple[int, Any]:
        """``/sandbox/domain`` on every cluster: GET describes the domain; PATCH ``{"cluster": name,
        "faults": {...}}`` changes that cluster's faults (as its own ``PATCH /sandbox/faults``), PUT sets
        exactly those; DELETE clears the faults of every cluster."""
        if method in ("PATCH", "PUT"):
            if not isinstance(payload, dict) or set(payload) - {"cluster", "faults"}:
                raise ValueError('give {"cluster": "<name>", "faults": {...}}')
            sb = self.clusters.get(str(payload.get("cluster")))
            if sb is None:
                raise ValueError(f"no cluster {payload.get('cluster')!r} in the domain ({', '.join(self.clusters)})")
            faults = payload.get("faults") or {}
            if not isinstance(faults, dict):
                raise ValueError("faults must be a mapping, as /sandbox/faults takes")
            if method == "PATCH":
                sb.faults.set(**faults)
            else:
                sb.faults.replace(faults)
        elif method == "DELETE":
            for sb in self.clusters.values():
                sb.faults.clear()
        elif method != "GET":
            return 405, {"error": "use GET, PATCH, PUT or DELETE"}
        return 200, self.describe(asked_from)

    # -- kubeconfig --------------------------------------------------------------------------------
    def kubeconfig(self, user: str = ADMIN_USER, current: str | None = None) -> dict[str, Any]:
        """One kubeconfig for the whole domain: a cluster, a user and a context per cluster, each named
        after it (the user ``<user>@<cluster>``); the current context is the first cluster's."""
        document: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [],
            "users": [],
            "contexts": [],
            "current-context": current or self.names()[0],
            "preferences": {},
        }
        for name, sb in self.clusters.items():
            single = persistence.kubeconfig(sb.url, user, sb.policy.token_for(user))
            document["clusters"].append({"name": name, "cluster": single["clusters"][0]["cluster"]})
            document["users"].append({"name": f"{user}@{name}", "user": single["users"][0]["user"]})
            document["contexts"].append({"name": name, "context": {"cluster": name, "user": f"{user}@{name}"}})
        return document

    def write_kubeconfig(self, path: str | Path, user: str = ADMIN_USER) -> Path:
        return persistence.write_yaml(Path(path), self.kubeconfig(user))


# -- pods of one cluster running in another ----------------------------------------------------------
REFLECTION = "domain-pod-reflection"  # the work queue of a cluster's reflection (key: a local namespace)
ORIGIN_LABEL = "liqo.io/origin-cluster-id"  # the sandbox's mark on a reflected pod: the cluster it comes from
NODE_NAME_LABEL = "offloading.liqo.io/nodename"  # the local virtual node the pod runs on (liqo-semantics f.2)
REFLECTOR = "liqo-virtual-kubelet"


class PodReflection:
    """The virtual kubelet's pod reflection from one cluster of the domain into its peers: a pod running on
    the virtual node for peer B runs in B too, in the twin namespace, with the local labels (but
    ``liqo.io/shadowPod``), ``offloading.liqo.io/nodename=<virtual node>`` and ``liqo.io/origin-cluster-id``;
    B's scheduler binds it to one of B's nodes. A pod that stops running here (deleted, aborted) goes
    from B too; nothing moves while B is unreachable."""

    def __init__(self, dom: Domain, name: str) -> None:
        self.domain = dom
        self.name = name
        self.sb = dom[name]
        self.sb.controller.register(REFLECTION, self.reconcile)
        self.sb.store.add_listener(self.on_change)

    def enqueue(self, namespace: str) -> None:
        self.sb.controller.enqueue(REFLECTION, namespace, self.sb.liqo.controller_delay)

    def resync(self) -> None:
        for nsoff in self.sb.store.items(NAMESPACE_OFFLOADINGS):
            self.enqueue(nsoff["metadata"]["namespace"])

    def on_change(self, kind: Kind, event: str, obj: Obj, prev: Obj | None) -> None:
        """Under the store's lock: only enqueue."""
        if kind is PODS:
            self.enqueue(obj["metadata"].get("namespace") or "")
        elif kind is NAMESPACE_MAPS:
            before = ((prev or {}).get("status") or {}).get("currentMapping") or {}
            after = (obj.get("status") or {}).get("currentMapping") or {}
            for namespace in set(before) | set(after):
                if before.get(namespace) != after.get(namespace):
                    self.enqueue(namespace)

    def reconcile(self, namespace: str) -> float | None:
        sb = self.sb
        virtual = {
            node["metadata"]["name"]: (node["metadata"].get("labels") or {}).get(c.REMOTE_CLUSTER_ID_LABEL, "")
            for node in sb.store.items(NODES)
            if is_virtual_node(node)
        }
        running: dict[str, dict[str, Obj]] = {}  # peer -> pod name -> the local pod
        for pod in sb.store.items(PODS, namespace):
            node = (pod.get("spec") or {}).get("nodeName") or ""
            live = not pod["metadata"].get("deletionTimestamp")
            if node in virtual and live and (pod.get("status") or {}).get("phase") == "Running":
                running.setdefault(virtual[node], {})[pod["metadata"]["name"]] = pod
        maps = sb.liqo.local_namespace_maps()
        for peer_id, peer in sb.liqo.peers.items():
            other = self.domain.clusters.get(peer_id)
            nm = maps.get(peer_id)
            if other is None or nm is None or peer.store is not other.store or sb.faults.peer_is_down(peer_id):
                continue
            mapping = ((nm.get("status") or {}).get("currentMapping") or {}).get(namespace) or {}
            remote = mapping.get("remoteNamespace") or ""
            if not remote or mapping.get("phase") != c.MAPPING_ACCEPTED:
                continue  # no twin (or one going away): its namespace controller deletes what it holds
            self._sync(other, remote, running.get(peer_id, {}))
        return None

    def _sync(self, other: Sandbox, remote: str, wanted: dict[str, Obj]) -> None:
        there = {
            pod["metadata"]["name"]: pod
            for pod in other.store.items(PODS, remote)
            if (pod["metadata"].get("labels") or {}).get(ORIGIN_LABEL) == self.name
        }
        try:
            for name, pod in wanted.items():
                if name not in there:
                    other.server.create(PODS, remote, self._remote_pod(pod, remote), manager=REFLECTOR)
            for name, pod in there.items():
                if name not in wanted and not pod["metadata"].get("deletionTimestamp"):
                    other.server.delete(PODS, remote, name)
        except ApiError as err:
            if err.code not in (403, 404, 409):  # the twin going away or the pod already there / gone
                raise

    def _remote_pod(self, pod: Obj, remote: str) -> Obj:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != c.SHADOW_POD_LABEL}
        labels.update({NODE_NAME_LABEL: spec.get("nodeName") or "", ORIGIN_LABEL: self.name})
        kept = ("containers", "initContainers", "restartPolicy", "serviceAccountName", "volumes")
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": meta["name"], "namespace": remote, "labels": labels},
            "spec": {key: clone(spec[key]) for key in kept if key in spec},  # no affinity (f.2), no nodeName
        }
