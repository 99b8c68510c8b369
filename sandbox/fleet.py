"""Large generated fleets for benchmarks and demos (`python -m sandbox generate`, `--scenario generated:NxK`):
peers over a few regions and providers, namespaces of which a share is offloaded with the selectors liqoctl
would write, optional pods. The result is a scenario document (`sandbox.scenarios` applies it)."""

from __future__ import annotations

import random
from typing import Any

import yaml

from liqo_rules import constants as c
from liqo_rules.peers import ROLE_PROVIDER

REGIONS = ("eu-south-1", "eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1", "ap-northeast-1")
PROVIDERS = ("eks", "gke", "aks", "kubeadm", "k3s")
TEAMS = ("payments", "search", "checkout", "identity", "data", "ml", "media", "ops", "web", "mobile")
ENVS = ("prod", "staging", "dev", "test")


def generate(
    namespaces: int,
    clusters: int,
    *,
    offloaded: float = 0.1,
    everywhere: float = 0.0,
    pods: int = 0,
    seed: int = 42,
    local_id: str = "rome",
) -> dict[str, Any]:
    """A large fleet: `clusters` peers over a few regions and providers, `namespaces` namespaces of which a
    fraction is offloaded with region / provider selectors, and `everywhere` of those with no selector
    (every peer); with `pods`, that many small pods in every namespace, and local workers enough to run
    those that stay local."""
    rnd = random.Random(seed)
    # Its own draws: a fleet without offloadings everywhere is the same as before this option.
    wide = random.Random(f"{seed}-everywhere")
    peers = []
    for i in range(clusters):
        region = REGIONS[i % len(REGIONS)]
        peers.append(
            {
                "id": f"cluster-{i:04d}",
                "role": ROLE_PROVIDER,
                "labels": {
                    "topology.kubernetes.io/region": region,
                    c.CLUSTER_PROVIDER_LABEL: PROVIDERS[i % len(PROVIDERS)],
                    **({"staging": "true"} if i % 10 == 9 else {}),
                },
                "resources": {"cpu": str(16 * (1 + i % 4)), "memory": f"{64 * (1 + i % 4)}Gi", "pods": "500"},
                **({"storageClasses": ["standard"]} if i % 3 else {}),
            }
        )
    # Workers for the pods: about 100 a node, as a cluster of that size would have.
    workers = max(3, 1 + namespaces * pods // 100)
    worker = {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}} if pods else {}
    items = []
    for i in range(namespaces):
        team, env = TEAMS[i % len(TEAMS)], ENVS[(i // len(TEAMS)) % len(ENVS)]
        ns: dict[str, Any] = {"name": f"{team}-{env}-{i:05d}", "labels": {"team": team, "env": env}}
        if pods:
            ns.update(pods=pods, app=team, requests={"cpu": "50m", "memory": "64Mi"})
        if rnd.random() < offloaded:
            roll = rnd.random()
            if roll < 0.6:
                ns["offloading"] = {
                    "selector": [
                        f"topology.kubernetes.io/region={rnd.choice(REGIONS)},{c.CLUSTER_PROVIDER_LABEL}={rnd.choice(PROVIDERS)}"
                    ]
                }
            elif roll < 0.9:
                ns["offloading"] = {
                    "selector": [f"topology.kubernetes.io/region={rnd.choice(REGIONS)},!staging"],
                    "podOffloadingStrategy": "Remote",
                }
            else:
                ns["offloading"] = {
                    "selector": [f"{c.CLUSTER_PROVIDER_LABEL}={rnd.choice(PROVIDERS)}"],
                    "namespaceMappingStrategy": "EnforceSameName",
                }
            if everywhere and wide.random() < everywhere:  # after the draws above, which keep their order
                ns["offloading"] = {"selector": []}
        items.append(ns)
    return {
        "description": f"Generated fleet: {namespaces} namespaces, {clusters} peers (seed {seed})",
        "localCluster": {"id": local_id, "labels": {c.CLUSTER_PROVIDER_LABEL: "kubeadm"}},
        "localNodes": [{"name": f"{local_id}-control-plane", "roles": ["control-plane"]}]
        + [{"name": f"{local_id}-worker-{i}", "roles": ["worker"], **worker} for i in range(1, workers + 1)],
        "peers": peers,
        "namespaces": items,
    }


def dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)
