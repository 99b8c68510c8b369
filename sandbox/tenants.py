"""The other direction: consumer peers that offload into this cluster (liqo-semantics.md a.6, b.1).

When a peer whose ForeignCluster role includes Consumer offloads one of its namespaces here, its
NamespaceMap is replicated into our tenant namespace for it (``liqo-tenant-<peer>``, named after our
cluster id), and Liqo's NamespaceMap controller creates the twin namespace here: named by the peer's
mapping strategy (``<ns>-<peer>`` with DefaultName), labelled ``liqo.io/remote-cluster-id=<peer>``,
annotated with the NamespaceMap that manages it and the peer's namespace name. When the peer stops
offloading it, the twin is deleted (Terminating, then gone once emptied). A namespace the map does not
manage is never deleted.

Scenario files list them per peer (``offloadsHere``); tests call `offload_here` / `withdraw_here`
with a running sandbox's ``server`` and ``liqo``.
"""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.peers import CONSUMER_ROLES, tenant_namespace_name
from liqo_rules.spec import FIELD_MAPPING, FIELD_REMOTE_NAME, is_dns1123_label, remote_namespace_name
from sandbox.apiserver import ApiServer
from sandbox.kinds import NAMESPACES
from sandbox.liqo import LiqoSimulation


def twin_name(consumer_id: str, namespace: str, spec: dict[str, Any] | None = None) -> str:
    """The name the twin of the peer's ``namespace`` gets here (the peer is the local cluster of its offloading)."""
    return remote_namespace_name(namespace, consumer_id, spec or {})


def namespace_map_ref(consumer_id: str, local_cluster_id: str) -> str:
    """``<namespace>/<name>`` of the peer's NamespaceMap as replicated here: in our tenant namespace for
    the peer, named after our cluster id (the peer names its maps after the provider)."""
    return f"{tenant_namespace_name(consumer_id)}/{local_cluster_id}"


def check_consumer(liqo: LiqoSimulation, consumer_id: str) -> None:
    """Refuse a peer that does not exist or does not consume this cluster."""
    peer = liqo.peers.get(consumer_id)
    if peer is None:
        raise ValueError(f"no peer {consumer_id!r} (peers: {', '.join(sorted(liqo.peers))})")
    role = peer.role
    if role not in CONSUMER_ROLES:
        raise ValueError(
            f"peer {consumer_id!r} has role {role!r}: only a peer that consumes this cluster "
            f"({' or '.join(CONSUMER_ROLES)}) offloads namespaces here"
        )


def entry_spec(entry: Any) -> tuple[str, dict[str, Any]]:
    """One ``offloadsHere`` item: a namespace name, or ``{name, namespaceMappingStrategy, remoteNamespaceName}``."""
    if isinstance(entry, str) and entry:
        return entry, {}
    if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
        unknown = set(entry) - {"name", FIELD_MAPPING, FIELD_REMOTE_NAME}
        if unknown:
            raise ValueError(f"offloadsHere: unknown field(s) {', '.join(sorted(unknown))}")
        return entry["name"], {k: v for k, v in entry.items() if k != "name"}
    raise ValueError(f"offloadsHere: give a namespace name or {{name: ..., {FIELD_MAPPING}: ...}}, not {entry!r}")


def offload_here(
    server: ApiServer, liqo: LiqoSimulation, consumer_id: str, namespace: str, spec: dict[str, Any] | None = None
) -> str:
    """The peer offloads its ``namespace`` here: create the twin as Liqo does; its name."""
    check_consumer(liqo, consumer_id)
    name = twin_name(consumer_id, namespace, spec)
    if not is_dns1123_label(name):  # Liqo fails to create it (CreationLoopBackOff on the peer's side)
        raise ValueError(f"the twin of {namespace!r} would be named {name!r}, which is not a valid namespace name")
    server.create(
        NAMESPACES,
        "",
        {
            "metadata": {
                "name": name,
                "labels": {c.REMOTE_CLUSTER_ID_LABEL: consumer_id},
                "annotations": {
                    c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION: namespace_map_ref(consumer_id, liqo.local_cluster_id),
                    c.ORIGINAL_NAME_ANNOTATION: namespace,
                },
            }
        },
        manager=c.CONTROLLER_MANAGER,
    )
    return name


def withdraw_here(
    server: ApiServer, liqo: LiqoSimulation, consumer_id: str, namespace: str, spec: dict[str, Any] | None = None
) -> str:
    """The peer stops offloading its ``namespace`` here: delete the twin (the namespace controller then
    empties and finalizes it); its name. Refused for a namespace the peer's map does not manage."""
    check_consumer(liqo, consumer_id)
    name = twin_name(consumer_id, namespace, spec)
    current = server.store.get(NAMESPACES, "", name)
    annotations = ((current or {}).get("metadata") or {}).get("annotations") or {}
    if annotations.get(c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION) != namespace_map_ref(consumer_id, liqo.local_cluster_id):
        raise ValueError(f"namespace {name!r} is not a twin of {consumer_id}'s {namespace!r}")
    server.delete(NAMESPACES, "", name)
    return name
