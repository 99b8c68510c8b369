"""What Liqo does not say in a NamespaceOffloading's status (issue 27, liqo-semantics.md "Behaviour the
pages report"): a stale per-cluster Ready condition, the errors the controller swallows (read from the
NamespaceMaps), the likely causes of a CreationLoopBackOff and a renamed Liqo RuntimeClass.

Pure functions over Liqo objects and the selection of ``liqo_rules.peers.select_clusters``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from liqo_rules import constants as c
from liqo_rules.spec import dns1123_problems

# --------------------------------------------------------------------------------------------------
# 1. A Ready condition Liqo never removes


def _condition(conditions: Iterable[Any], ctype: str) -> dict[str, Any] | None:
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def stale_ready_reason(conditions: Iterable[Any] | None, *, deleting: bool, mapped: bool | None = None) -> str:
    """The reason of a cluster's Ready condition when it is stale, else "".

    setRemoteConditionsForEveryCluster adds or updates Ready only while the cluster is required or its
    NamespaceMap still has a currentMapping entry; it never removes it. Once a de-selected cluster's
    remote namespace is gone, its Ready (usually ``Terminating``) stays next to ``OffloadingRequired=False``.
    ``mapped``: whether the cluster's NamespaceMap still has a currentMapping entry for the namespace
    (then the teardown is real and in progress); None when the NamespaceMap is not known. While the
    NamespaceOffloading is being deleted Liqo removes the cluster's whole entry instead: never stale.
    Liqo always writes OffloadingRequired: without it (or with another status than False) nothing is
    known to be stale.
    """
    conditions = list(conditions or [])
    required = _condition(conditions, c.CONDITION_OFFLOADING_REQUIRED)
    ready = _condition(conditions, c.CONDITION_READY)
    if deleting or ready is None or mapped or required is None or required.get("status") != "False":
        return ""
    return str(ready.get("reason") or ready.get("status") or c.CONDITION_READY)


def stale_ready_message(reason: str) -> str:
    """What the page says next to a not-selected cluster whose Ready condition is stale."""
    return (
        f"Not selected. Liqo's Ready condition still says {reason}: it is left from when the cluster was "
        "selected (Liqo never removes it), not the state of a remote namespace."
    )


# --------------------------------------------------------------------------------------------------
# 2. Errors the NamespaceOffloading controller swallows

GAP_NOT_TAKEN_UP = "not-taken-up"  # selected, but the NamespaceMap has no desiredMapping entry
GAP_NOT_DROPPED = "not-dropped"  # the NamespaceMap still asks for it, the selector no longer selects it
GAP_NO_NAMESPACE_MAP = "no-namespace-map"  # a VirtualNode's cluster has no NamespaceMap: every reconcile fails


@dataclass(frozen=True)
class Gap:
    cluster_id: str
    kind: str

    def text(self, namespace: str) -> str:
        if self.kind == GAP_NO_NAMESPACE_MAP:
            return (
                f"{self.cluster_id} has a virtual node but no NamespaceMap: Liqo's controller stops every "
                f'reconcile at "no NamespaceMap found for remote cluster ID: {self.cluster_id}", before selecting'
            )
        if self.kind == GAP_NOT_TAKEN_UP:
            return (
                f"the selector selects {self.cluster_id}, but its NamespaceMap has no desiredMapping entry "
                f"for {namespace}: Liqo has not asked for the remote namespace there"
            )
        return (
            f"the selector no longer selects {self.cluster_id}, but its NamespaceMap still asks for "
            f"{namespace}: Liqo has not released the remote namespace there"
        )


def controller_gaps(
    selection: Mapping[str, Mapping[str, Any]],
    desired: Iterable[str],
    maps: Iterable[str],
    *,
    deleting: bool = False,
) -> list[Gap]:
    """Where the NamespaceMaps disagree with what the controller should have written, sorted by cluster.

    ``selection``: select_clusters' verdict per cluster id (clusters with a virtual node); ``desired``:
    the clusters whose NamespaceMap has ``spec.desiredMapping[<namespace>]``; ``maps``: the clusters that
    have a NamespaceMap. A cluster whose verdict errored or was not reached is left out: Liqo leaves its
    mapping as it was and says so in an ``Invalid`` Event. While deleting, every desired entry should go.
    """
    wanted, present = set(desired), set(maps)
    if deleting:
        return [Gap(cluster_id, GAP_NOT_DROPPED) for cluster_id in sorted(wanted & present)]
    gaps = []
    for cluster_id in sorted(selection):
        entry = selection[cluster_id]
        if cluster_id not in present:
            gaps.append(Gap(cluster_id, GAP_NO_NAMESPACE_MAP))
        elif not entry.get("reached") or entry.get("error"):
            continue
        elif entry.get("selected") and cluster_id not in wanted:
            gaps.append(Gap(cluster_id, GAP_NOT_TAKEN_UP))
        elif not entry.get("selected") and cluster_id in wanted:
            gaps.append(Gap(cluster_id, GAP_NOT_DROPPED))
    return gaps


SWALLOWED_ERRORS = (
    "Liqo's controller writes the status even when the reconcile failed and then drops the error "
    "(only its log says it, and no retry comes before the next change of the offloading, a NamespaceMap "
    "or a virtual node): a failed NamespaceMap patch, a missing NamespaceMap, an invalid selector."
)


# --------------------------------------------------------------------------------------------------
# 3. Why a remote namespace is in CreationLoopBackOff

CAUSE_INVALID_NAME = "invalid-name"
CAUSE_NAME_TAKEN = "name-taken"


@dataclass(frozen=True)
class Cause:
    code: str
    text: str


def backoff_causes(remote_name: str, strategy: str, *, peer_visible: bool = False) -> list[Cause]:
    """The likely causes of ``CreationLoopBackOff`` for ``remote_name`` on a peer, most certain first.

    The provider's NamespaceMap controller fails when the Namespace cannot be created (an invalid name,
    e.g. over 63 characters: DefaultName appends the local cluster id and never truncates) or when a
    namespace of that name exists and is not annotated as managed by this cluster's NamespaceMap (made on
    the peer, or the twin of another consumer's namespace). An invalid name is certain and alone; the
    taken name is likely with EnforceSameName and SelectedName, possible with DefaultName.
    ``peer_visible``: whether the dashboard can list the peer's namespaces (not yet).
    """
    problems = dns1123_problems(remote_name) if remote_name else ["is empty"]
    if problems:
        return [
            Cause(
                CAUSE_INVALID_NAME,
                f'the remote name "{remote_name}" is not a valid namespace name ({"; ".join(problems)}): '
                "the peer's API server refuses to create it",
            )
        ]
    if strategy == c.DEFAULT_NAME:
        how = "possible, though the name ends with this cluster's id"
    else:
        how = f"likely with {strategy or c.DEFAULT_NAME}, which uses the same name on every peer"
    seen = "the peer's namespaces are not visible from here" if not peer_visible else "check the peer's namespaces"
    return [
        Cause(
            CAUSE_NAME_TAKEN,
            f'a namespace "{remote_name}" already exists on the peer and is not managed by this cluster\'s '
            f"NamespaceMap (made there by hand, or another consumer's twin): {how}; {seen}",
        )
    ]


def shared_remote_note(others: Iterable[str], remote_name: str) -> str:
    """What it means when other local namespaces map to the same remote name on a peer (collisions).

    On the provider both entries belong to the same NamespaceMap (one per consumer), so the second finds
    the namespace annotated as managed by it and is Accepted too: no CreationLoopBackOff. The two share
    one remote namespace, and the teardown of either (de-selection, unoffload) deletes it for both.
    """
    names = sorted(others)
    verb = "maps" if len(names) == 1 else "map"
    return (
        f'{", ".join(names)} also {verb} to "{remote_name}" there: Liqo accepts both into one shared '
        "remote namespace, and unoffloading or de-selecting either deletes it for both"
    )


# --------------------------------------------------------------------------------------------------
# NamespaceMaps


def local_map_cluster(nm: Mapping[str, Any]) -> str:
    """The peer's cluster id of a local NamespaceMap, "" for one the controller does not count.

    Local, as setNamespaceOffloadingStatus lists them: ``liqo.io/replication=true``, ``liqo.io/remoteID``
    present and ``liqo.io/remote-cluster-id`` set (its value is the key the controller uses).
    """
    labels = (nm.get("metadata") or {}).get("labels") or {}
    if labels.get(c.REPLICATION_LABEL) != "true" or c.REMOTE_ID_LABEL not in labels:
        return ""
    return str(labels.get(c.REMOTE_CLUSTER_ID_LABEL) or "")


def map_entries(nm: Mapping[str, Any]) -> dict[str, tuple[str, str, str]]:
    """``{local namespace: (desired remote name, current remote name, current phase)}`` of a NamespaceMap;
    "" where the map says nothing (not desired, no currentMapping entry)."""
    desired = (nm.get("spec") or {}).get("desiredMapping") or {}
    current = (nm.get("status") or {}).get("currentMapping") or {}
    out: dict[str, tuple[str, str, str]] = {}
    for name in sorted(set(desired) | set(current)):
        entry = current.get(name)
        entry = entry if isinstance(entry, dict) else {}
        out[str(name)] = (
            str(desired.get(name) or ""),
            str(entry.get("remoteNamespace") or ""),
            str(entry.get("phase") or ""),
        )
    return out
