"""What a sandbox domain is made of (``sandbox.domain`` runs it): the scenario grammar (``domain:...`` or a
YAML file with ``domain:``), each cluster's spec, its role as seen from another cluster, its labels, its
demo or generated namespaces and the single-cluster scenario each cluster is started from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from liqo_rules import constants as c
from liqo_rules.peers import ROLE_CONSUMER, ROLE_CONSUMER_AND_PROVIDER, ROLE_PROVIDER
from liqo_rules.spec import is_dns1123_label
from sandbox import scenarios
from sandbox.objects import clone

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
