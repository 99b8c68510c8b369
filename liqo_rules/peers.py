"""Health of peered clusters and virtual nodes, as ``liqoctl info`` reports it (liqo-semantics.md g)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from liqo_rules.constants import (
    REMOTE_CLUSTER_ID_LABEL,
    REMOTE_ID_LABEL,
    REPLICATION_LABEL,
    TENANT_NAMESPACE_PREFIX,
)
from liqo_rules.selectors.match import (
    cluster_matches,
    explain,
    explanation_key,
    explanation_reads,
    prepare_terms,
)
from liqo_rules.selectors.requirements import SelectorError

HEALTHY_CONDITION_STATUSES = ("Established", "Ready")
HEALTHY_VIRTUAL_NODE_STATUSES = ("Running", "None")
ROLE_PROVIDER = "Provider"
ROLE_CONSUMER = "Consumer"
ROLE_CONSUMER_AND_PROVIDER = "ConsumerAndProvider"
PROVIDER_ROLES = (ROLE_PROVIDER, ROLE_CONSUMER_AND_PROVIDER)
# A ForeignCluster module's status as module_status reports it.
MODULE_HEALTHY, MODULE_UNHEALTHY, MODULE_DISABLED = "Healthy", "Unhealthy", "Disabled"
CONSUMER_ROLES = (ROLE_CONSUMER, ROLE_CONSUMER_AND_PROVIDER)


def module_status(module: dict[str, Any] | None) -> tuple[str, list[str]]:
    """``Disabled`` / ``Unhealthy`` / ``Healthy`` for a ForeignCluster module, and its alerts (the
    messages of the conditions that are neither Established nor Ready; only when Unhealthy)."""
    if not module or not module.get("enabled"):
        return MODULE_DISABLED, []
    bad = [c for c in module.get("conditions") or [] if c.get("status") not in HEALTHY_CONDITION_STATUSES]
    if bad:
        return MODULE_UNHEALTHY, [c.get("message") or c.get("type", "") for c in bad]
    return MODULE_HEALTHY, []


def virtual_node_healthy(virtual_node: dict[str, Any]) -> bool:
    """Healthy only if the VirtualNode has conditions and every one is Running or None."""
    conditions = (virtual_node.get("status") or {}).get("conditions") or []
    return bool(conditions) and all(c.get("status") in HEALTHY_VIRTUAL_NODE_STATUSES for c in conditions)


def _decide(cluster_selector: dict[str, Any] | None, labels: dict[str, str], vn_name: str) -> dict[str, Any]:
    """explain()'s verdict without its per-term account: ``{"selected", "error"}``."""
    try:
        return {"selected": cluster_matches(cluster_selector, labels, {"metadata.name": vn_name}), "error": None}
    except SelectorError as err:
        return {"selected": False, "error": str(err)}


def select_clusters(
    cluster_selector: dict[str, Any] | None,
    virtual_nodes: list[tuple[str, str, dict[str, str]]],
    *,
    terms: bool = True,
) -> dict[str, dict[str, Any]]:
    """Which clusters the NamespaceOffloading controller would select (liqo-semantics.md a.5, i).

    ``virtual_nodes`` are ``(cluster_id, virtual_node_name, labels)`` in list order. The controller
    evaluates each VirtualNode in turn; the last one of a cluster decides for that cluster, and an
    invalid selector stops the pass at the first VirtualNode where it errors (clusters not reached keep
    whatever mapping they had; for a preview we report them as not selected). Returns, per cluster id,
    ``{"selected", "explanations": [(vn_name, explain-dict)], "disagree", "error", "reached"}``.
    With ``terms=False`` each explanation holds only ``selected`` and ``error`` (the simulated
    controller's fast path: the same verdicts without writing every term out)."""

    result: dict[str, dict[str, Any]] = {}
    stopped = False
    prepared = prepare_terms(cluster_selector) if terms and virtual_nodes else []
    seen: dict[Hashable, dict[str, Any]] = {}  # nodes alike for the selector share one explanation
    reads = explanation_reads(prepared)
    for cluster_id, vn_name, labels in virtual_nodes:
        entry = result.setdefault(
            cluster_id,
            {"selected": False, "explanations": [], "disagree": False, "error": None, "reached": False},
        )
        if stopped:
            continue
        if terms:
            key = explanation_key(reads, labels, vn_name)
            if key not in seen:
                seen[key] = explain(cluster_selector, labels, {"metadata.name": vn_name}, prepared=prepared)
            why = seen[key]
        else:
            why = _decide(cluster_selector, labels, vn_name)
        entry["explanations"].append((vn_name, why))
        entry["reached"] = True
        if why["error"]:
            entry["error"] = why["error"]
            stopped = True
            continue
        if len(entry["explanations"]) > 1 and entry["selected"] != why["selected"]:
            entry["disagree"] = True
        entry["selected"] = why["selected"]
    return result


def node_of(virtual_node: dict[str, Any], nodes_by_name: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The Node of a VirtualNode (c.5): same name and labelled with the same remote cluster id."""
    node = nodes_by_name.get((virtual_node.get("metadata") or {}).get("name", ""))
    if node is None:
        return None
    cluster_id = (virtual_node.get("spec") or {}).get("clusterID", "")
    labels = (node.get("metadata") or {}).get("labels") or {}
    return node if labels.get(REMOTE_CLUSTER_ID_LABEL) == cluster_id else None


def tenant_namespace_name(cluster_id: str) -> str:
    """The tenant namespace Liqo creates for a peering: ``liqo-tenant-<clusterID>``."""
    return TENANT_NAMESPACE_PREFIX + cluster_id


def is_local_namespace_map(namespace_map: dict[str, Any]) -> bool:
    """Whether the NamespaceOffloading controller counts this NamespaceMap (a.4): labelled
    ``liqo.io/replication=true``, with a ``liqo.io/remoteID`` label and a non-empty remote cluster id."""
    labels = (namespace_map.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(REPLICATION_LABEL) == "true"
        and REMOTE_ID_LABEL in labels
        and bool(labels.get(REMOTE_CLUSTER_ID_LABEL))
    )
