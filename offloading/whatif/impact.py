"""What a bulk change does to each namespace, before it is submitted: the clusters it gains and loses,
the remote (twin) namespaces Liqo will delete, and every spec field that changes. A bulk change that
loses clusters anywhere, or unoffloads, needs typed confirmation (the number of namespaces).

Computed from the snapshot only: the selection of the one spec a bulk change applies is computed once
(``liqo_rules.peers``), the clusters each namespace has now come from one query, its running pods
(``podimpact``) from another.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from liqo_rules import peers as liqo_peers
from liqo_rules.selectors.format import format_term
from liqo_rules.selectors.requirements import UnformattableTermError
from liqo_rules.spec import apply_defaults
from offloading.choices import ChangeAction
from offloading.models import ChangeRequest, ClusterOffloading, VirtualNode
from offloading.whatif.pods import PodImpact, pod_impact, running_pods

FIELD_NAMES = {
    "namespaceMappingStrategy": "namespace mapping",
    "podOffloadingStrategy": "pod offloading",
    "clusterSelector": "cluster selector",
    "remoteNamespaceName": "remote namespace name",
}


@dataclass
class Impact:
    namespace: str
    action: str
    gains: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    # (field, before, after) in words, for every spec field that changes
    fields: list[tuple[str, str, str]] = field(default_factory=list)
    # The running pods hit (on lost clusters, or no longer allowed by a stricter pod strategy).
    pods: PodImpact = field(default_factory=lambda: PodImpact(followed=False))

    @property
    def deletes_remote(self) -> list[str]:
        """The clusters whose twin namespace (and everything in it) Liqo deletes."""
        return self.losses


@dataclass
class BulkImpact:
    rows: list[Impact]
    # Every cluster the spec selects (offload and update rows), for the room on them.
    targets: list[str] = field(default_factory=list)

    @property
    def pods_on_lost_clusters(self) -> int:
        return sum(row.pods.on_lost_clusters for row in self.rows)

    @property
    def pods_off_strategy(self) -> int:
        return sum(row.pods.off_strategy for row in self.rows)

    @property
    def losing(self) -> list[Impact]:
        return [row for row in self.rows if row.losses]

    @property
    def remote_deleted(self) -> int:
        return sum(len(row.losses) for row in self.rows)


def _term_text(term: Any) -> str:
    """One term in liqoctl syntax or, when liqoctl cannot print it (a value with spaces, ``Gt``,
    ``matchFields``: the API server accepts them from kubectl or GitOps tools), its JSON form, saying so."""
    try:
        return format_term(term)
    except UnformattableTermError:
        text = json.dumps(term, sort_keys=True, separators=(", ", ": "), ensure_ascii=False)
        return f"{text} (liqoctl cannot print this term)"


def _selector_text(spec: dict[str, Any]) -> str:
    terms = ((spec.get("clusterSelector") or {}).get("nodeSelectorTerms")) or []
    return " OR ".join(_term_text(term) for term in terms) or "(every cluster)"


def field_text(key: str, spec: dict[str, Any] | None) -> str:
    """One spec field in words, defaulted as the API server does: the cluster selector in liqoctl syntax
    (its terms ORed), the others as they are, "(none)" when unset."""
    values = apply_defaults(spec or {})
    if key == "clusterSelector":
        return _selector_text(values)
    return str(values.get(key) or "(none)")


def field_changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """(field, before, after) in words for every spec field that differs; none when either side is not
    a spec (a new offloading, an unoffload). Used by the bulk impact and the edit preview."""
    if before is None or after is None:
        return []
    changes = []
    for key, label in FIELD_NAMES.items():
        was, now = field_text(key, before), field_text(key, after)
        if was != now:
            changes.append((label, was, now))
    return changes


def bulk_impact(changes: list[ChangeRequest]) -> BulkImpact:
    """The impact of each (unsaved) child of a bulk change (of one managed cluster, the first change's);
    three queries whatever their number."""
    names = [c.namespace for c in changes]
    managed = changes[0].managed_id if changes else None
    running = running_pods(names, managed)
    now: dict[str, set[str]] = {}
    rows_now = ClusterOffloading.objects.of(managed).filter(namespace__name__in=names, selected=True)
    for namespace, cluster_id in rows_now.values_list("namespace__name", "cluster_id"):
        now.setdefault(namespace, set()).add(cluster_id)
    virtual_nodes = list(
        VirtualNode.objects.of(managed).order_by("namespace", "name").values_list("cluster_id", "name", "labels")
    )
    selections: dict[str, set[str]] = {}
    rows = []
    for change in changes:
        before = now.get(change.namespace, set())
        if change.action == ChangeAction.UNOFFLOAD:
            pods = pod_impact(running.get(change.namespace, {}), [], change.base_spec, None, unoffload=True)
            rows.append(Impact(change.namespace, change.action, losses=sorted(before), pods=pods))
            continue
        spec = change.desired_spec or {}
        key = repr(spec.get("clusterSelector"))
        if key not in selections:
            picked = liqo_peers.select_clusters(spec.get("clusterSelector"), virtual_nodes)
            selections[key] = {cluster_id for cluster_id, entry in picked.items() if entry["selected"]}
        after = selections[key]
        offloaded = change.action == ChangeAction.UPDATE
        losses = sorted(before - after) if offloaded else []
        pods = PodImpact(followed=False)
        if offloaded:
            pods = pod_impact(running.get(change.namespace, {}), losses, change.base_spec, spec)
        rows.append(
            Impact(
                change.namespace,
                change.action,
                gains=sorted(after - before),
                losses=losses,
                fields=field_changes(change.base_spec, spec) if offloaded else [],
                pods=pods,
            )
        )
    return BulkImpact(rows, targets=sorted(set().union(*selections.values())))
