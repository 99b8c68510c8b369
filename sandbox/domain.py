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

import re
import socket
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from liqo_rules import constants as c
from liqo_rules.peers import ROLE_CONSUMER, ROLE_CONSUMER_AND_PROVIDER, ROLE_PROVIDER, tenant_namespace_name
from liqo_rules.spec import is_dns1123_label
from sandbox import persistence, scenarios
from sandbox.errors import ApiError
from sandbox.faults import FaultSettings
from sandbox.kinds import CONFIG_MAPS, NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS, NODES, PODS, Kind
from sandbox.liqo.context import is_virtual_node
from sandbox.objects import Obj, clone
from sandbox.rbac import ADMIN_USER
from sandbox.server import Sandbox

PREFIX = "domain:"
PROVIDER_ONLY = "provider"
NAMES = ("rome", "milan", "naples", "turin", "florence", "bologna", "genoa", "venice", "palermo", "bari")
MAX_CLUSTERS = 20
REGIONS = ("eu-south-1", "eu-west-1", "eu-central-1")
PROVIDERS = ("kubeadm", "eks", "gke", "aks")
REGION_LABEL = "topology.kubernetes.io/region"
# What a cluster entry of a domain YAML may say besides the single-cluster scenario keys it passes on.
CLUSTER_KEYS = {"name", "providerOnly", "port", "labels", "generated"}
COMPUTED_KEYS = {"localCluster", "peers"}  # the domain writes these itself


@dataclass
class ClusterSpec:
    """One cluster of a domain: its name (= its Liqo cluster id and its kubeconfig context)."""

    name: str
    provider_only: bool = False
    port: int | None = None  # None: the domain's --port plus the cluster's index (0: a free one)
    labels: dict[str, str] = field(default_factory=dict)
    scenario: dict[str, Any] = field(default_factory=dict)  # single-cluster keys: namespaces, localNodes, ...
    # ``NxK@F~E+P`` (scenarios.generated): N generated namespaces and K simulated peers besides the domain
    generated: str | None = None


@dataclass
class DomainSpec:
    clusters: list[ClusterSpec]
    description: str = ""

    def names(self) -> list[str]:
        return [cluster.name for cluster in self.clusters]


# -- parsing ---------------------------------------------------------------------------------------
def is_domain(scenario: str | Path | dict[str, Any]) -> bool:
    """Whether ``--scenario`` asks for a domain (a ``domain:`` string, or YAML with a top-level ``domain:``)."""
    if isinstance(scenario, dict):
        return "domain" in scenario
    if str(scenario).startswith(PREFIX):
        return True
    path = Path(scenario)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return False
    with path.open() as fh:  # a look at the top-level keys, not a parse (fleet files are large)
        return any(re.match(r"domain\s*:", line) for line in fh)


def load(scenario: str | Path | dict[str, Any]) -> DomainSpec:
    """The domain a ``--scenario`` value describes; ValueError when it is not a valid one."""
    if isinstance(scenario, dict):
        return from_data(scenario)
    text = str(scenario)
    if text.startswith(PREFIX):
        return parse(text[len(PREFIX) :])
    data = yaml.safe_load(Path(scenario).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"domain scenario {scenario} is not a YAML mapping")
    return from_data(data)


def parse(text: str) -> DomainSpec:
    """``3`` or ``rome,milan,turin:provider``, optionally followed by ``/NxK@F~E+P``: a generated fleet in
    every cluster (scenarios.generated: N namespaces, K simulated peers besides the domain)."""
    text, _, fleet = text.strip().partition("/")
    spec = _parse_clusters(text)
    if fleet:
        for cluster in spec.clusters:
            cluster.generated = fleet
    return _checked(spec)


def _parse_clusters(text: str) -> DomainSpec:
    text = text.strip()
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= MAX_CLUSTERS:
            raise ValueError(f"domain:N takes 1 to {MAX_CLUSTERS} clusters, not {count}")
        names = [NAMES[i] if i < len(NAMES) else f"cluster-{i + 1}" for i in range(count)]
        return DomainSpec([ClusterSpec(name) for name in names])
    clusters = []
    for item in text.split(","):
        name, _, flag = item.strip().partition(":")
        if flag not in ("", PROVIDER_ONLY):
            raise ValueError(f"domain: unknown flag {flag!r} on cluster {name!r} (only ':{PROVIDER_ONLY}')")
        clusters.append(ClusterSpec(name, provider_only=flag == PROVIDER_ONLY))
    return DomainSpec(clusters)


def from_data(data: dict[str, Any]) -> DomainSpec:
    """The YAML form: ``{description, domain: {clusters: [name | {name, providerOnly, port, labels, ...}]}}``."""
    domain = data.get("domain")
    if not isinstance(domain, dict) or not isinstance(domain.get("clusters"), list):
        raise ValueError("a domain scenario needs domain: {clusters: [...]}")
    clusters = []
    for entry in domain["clusters"]:
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"domain: a cluster is a name or a mapping with a name, not {entry!r}")
        computed = COMPUTED_KEYS & set(entry)
        if computed:
            raise ValueError(f"domain: cluster {entry['name']!r}: the domain writes {', '.join(sorted(computed))}")
        port = entry.get("port")
        if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536):
            raise ValueError(f"domain: cluster {entry['name']!r}: port must be a port number")
        provider_only = entry.get("providerOnly", False)
        if not isinstance(provider_only, bool):
            raise ValueError(f"domain: cluster {entry['name']!r}: providerOnly must be true or false")
        clusters.append(
            ClusterSpec(
                entry["name"],
                provider_only=provider_only,
                port=port,
                labels={str(k): str(v) for k, v in (entry.get("labels") or {}).items()},
                generated=str(entry["generated"]) if entry.get("generated") else None,
                scenario={k: clone(v) for k, v in entry.items() if k not in CLUSTER_KEYS},
            )
        )
    return _checked(DomainSpec(clusters, str(data.get("description") or "")))


def _checked(spec: DomainSpec) -> DomainSpec:
    names = spec.names()
    if not names:
        raise ValueError("a domain needs at least one cluster")
    for name in names:
        if not is_dns1123_label(name) or name == "local":
            raise ValueError(f"domain: {name!r} is not a valid cluster name (a DNS label such as rome)")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"domain: cluster(s) named twice: {', '.join(duplicates)}")
    if len(names) > MAX_CLUSTERS:
        raise ValueError(f"a domain holds at most {MAX_CLUSTERS} clusters")
    for cluster in spec.clusters:
        if cluster.generated is None:
            continue
        fleet = scenarios.generated(cluster.generated, cluster.name)
        if fleet is None:
            raise ValueError(f"domain: cluster {cluster.name!r}: {cluster.generated!r} is not NxK[@F][~E][+P]")
        clashes = sorted({peer["id"] for peer in fleet["peers"]} & set(names))
        if clashes:
            raise ValueError(f"domain: cluster(s) {', '.join(clashes)} share their name with generated peers")
    return spec


# -- the scenario of each cluster ------------------------------------------------------------------
def role_of(peer: ClusterSpec, seen_from: ClusterSpec) -> str | None:
    """The role ``seen_from``'s ForeignCluster for ``peer`` shows; None: the two do not peer (both are
    provider-only). Every cluster provides; a cluster that is not provider-only consumes the others."""
    provides = not seen_from.provider_only  # seen_from offloads into peer
    consumes = not peer.provider_only  # peer offloads into seen_from
    if provides and consumes:
        return ROLE_CONSUMER_AND_PROVIDER
    if provides:
        return ROLE_PROVIDER
    if consumes:
        return ROLE_CONSUMER
    return None


def labels_of(spec: DomainSpec, cluster: ClusterSpec) -> dict[str, str]:
    index = spec.clusters.index(cluster)
    defaults = {
        REGION_LABEL: REGIONS[index % len(REGIONS)],
        c.CLUSTER_PROVIDER_LABEL: PROVIDERS[index % len(PROVIDERS)],
    }
    return {**defaults, **cluster.labels}


def demo_namespaces(spec: DomainSpec, cluster: ClusterSpec) -> list[dict[str, Any]]:
    """A few namespaces per cluster. A consumer offloads ``web`` to the next cluster of the domain
    (DefaultName: ``web-<cluster>`` there), ``api`` to every peer, ``ml-<cluster>`` to the previous one
    with EnforceSameName and its two pods only remote (they run there); ``batch`` stays local (and shares its name with every
    other cluster's ``batch``)."""
    team = {"team": cluster.name}
    local = [{"name": "batch", "labels": {**team, "env": "prod"}, "pods": 1}]
    if cluster.provider_only:
        return [*local, {"name": "monitoring", "labels": {**team, "env": "ops"}}]
    others = [other.name for other in spec.clusters if other is not cluster]
    if not others:
        return local
    index = spec.clusters.index(cluster)
    ring = [other.name for other in spec.clusters[index + 1 :] + spec.clusters[:index]]
    after, before = ring[0], ring[-1]
    return [
        {
            "name": "web",
            "labels": {**team, "env": "prod"},
            "offloading": {"selector": [f"{c.REMOTE_CLUSTER_ID_LABEL}={after}"]},
            "pods": 2,
        },
        {"name": "api", "labels": {**team, "env": "prod"}, "offloading": {"selector": []}, "pods": 1},
        {
            "name": f"ml-{cluster.name}",
            "labels": {**team, "env": "staging"},
            "offloading": {
                "selector": [f"{c.REMOTE_CLUSTER_ID_LABEL}={before}"],
                "namespaceMappingStrategy": "EnforceSameName",
                "podOffloadingStrategy": "Remote",
            },
            "pods": 2,
        },
        *local,
    ]


def namespaces_of(spec: DomainSpec, cluster: ClusterSpec) -> list[dict[str, Any]]:
    """The cluster's namespaces: its scenario's, else its generated fleet's (a provider-only cluster
    offloads none of them), else the demo's."""
    if "namespaces" in cluster.scenario:
        return list(cluster.scenario["namespaces"] or [])
    fleet = generated_fleet(cluster)
    if fleet is not None:
        if cluster.provider_only:
            return [{k: v for k, v in ns.items() if k != "offloading"} for ns in fleet["namespaces"]]
        return list(fleet["namespaces"])
    return demo_namespaces(spec, cluster)


def generated_fleet(cluster: ClusterSpec) -> dict[str, Any] | None:
    return scenarios.generated(cluster.generated, cluster.name) if cluster.generated else None


def cluster_scenario(
    spec: DomainSpec, cluster: ClusterSpec, namespaces: dict[str, list[dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The single-cluster scenario of one cluster: its nodes and namespaces, a peer for every other
    cluster it peers with (the peer's labels are that cluster's own), then its generated peers, if any.
    ``namespaces``: every cluster's (``namespaces_of``), when the caller has them already."""
    namespaces = namespaces or {other.name: namespaces_of(spec, other) for other in spec.clusters}
    fleet = generated_fleet(cluster)
    data = clone(cluster.scenario)
    data.setdefault("description", f"cluster {cluster.name} of the domain {', '.join(spec.names())}")
    data["localCluster"] = {"id": cluster.name, "labels": labels_of(spec, cluster)}
    default_nodes = [{"name": f"{cluster.name}-control-plane", "roles": ["control-plane"]}] + [
        {"name": f"{cluster.name}-worker-{i}", "roles": ["worker"]} for i in (1, 2)
    ]
    data.setdefault("localNodes", fleet["localNodes"] if fleet else default_nodes)
    data["namespaces"] = namespaces[cluster.name]
    peers = []
    for other in spec.clusters:
        role = None if other is cluster else role_of(other, cluster)
        if role is None:
            continue
        peers.append(
            {
                "id": other.name,
                "role": role,
                "labels": labels_of(spec, other),
                # Until the domain links the clusters, the peer's store stands for it: its namespaces,
                # so that an EnforceSameName offloading conflicts from the start as it will after.
                "existingNamespaces": [ns["name"] for ns in namespaces[other.name]],
            }
        )
    if fleet and not cluster.provider_only:
        peers += fleet["peers"]
    data["peers"] = peers
    return data


# -- the running domain ----------------------------------------------------------------------------
def state_path(path: str | Path, cluster: str) -> Path:
    """Each cluster's state file: ``var/state.json`` -> ``var/state-rome.json``."""
    path = Path(path)
    return path.with_name(f"{path.stem}-{cluster}{path.suffix}")


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
