"""Which changes destroy something, and why: the one rule of "a destructive change needs confirmation".

A change is destructive when it:

* **unoffloads** the namespace: Liqo deletes its twin (remote) namespace on every peer, and everything
  reflected into it;
* **loses a cluster**: an edit whose cluster selector no longer selects a peer the namespace is on now
  (its status says so): Liqo deletes the twin namespace there, with the pods running in it;
* makes the **pod offloading strategy stricter** on one side (``LocalAndRemote`` to ``Remote`` or
  ``Local``, ``Remote`` to ``Local`` and back): the pods on that side no longer satisfy the node affinity
  Liqo's webhook gives them (``offloading.whatif.pods.stricter``). Affinity is checked only at scheduling,
  so they run on until they are recreated, and are then placed on the other side only.

A new offloading, an edit that only gains clusters or loosens the strategy, and labelling the namespace
are not destructive. Computed from the snapshot only; the request contract
(``offloading.changes.requests``) refuses a destructive change that was not confirmed, for every entry
point (the pages, the REST API, bulk, re-apply), and the pages and the API preview show the same reason
before it is submitted.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from liqo_rules import peers as liqo_peers
from liqo_rules.spec import FIELD_POD, FIELD_SELECTOR, normalize_spec
from offloading.choices import ChangeAction
from offloading.models import ChangeRequest, ClusterOffloading, Namespace, VirtualNode
from offloading.models.fleet import ManagedRef
from offloading.whatif.pods import stricter

# How many cluster ids a reason names before it says how many more there are.
NAMED_CLUSTERS = 5

_SIDE = {"local": "local nodes", "remote": "the peers (virtual nodes)"}
_OTHER = {"local": "on the peers", "remote": "locally"}


def _clusters(ids: Collection[str]) -> str:
    named = sorted(ids)
    if len(named) <= NAMED_CLUSTERS:
        return ", ".join(named)
    return f"{', '.join(named[:NAMED_CLUSTERS])} and {len(named) - NAMED_CLUSTERS} more"


def _pod_strategy(spec: dict[str, Any] | None) -> str:
    return str(normalize_spec(spec or {})[FIELD_POD])


def _selector(spec: dict[str, Any] | None) -> Any:
    return normalize_spec(spec or {}).get(FIELD_SELECTOR)


def destructive_reason(
    namespace: str,
    action: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    on_now: Collection[str],
    selects: Callable[[Any], set[str]],
) -> str | None:
    """Why changing ``namespace`` (offloaded with spec ``before``, None when it is not) by ``action``
    (a ChangeAction) to spec ``after`` is destructive, or None when it is not. ``on_now``: the peers its
    status says it is on; ``selects``: the peers a cluster selector selects now. Pure: the table of the
    rule's cases is tested on it."""
    if before is None:
        return None  # a new offloading (an unoffload of nothing is refused by the contract anyway)
    if action == ChangeAction.UNOFFLOAD:
        where = f"on {_clusters(on_now)}" if on_now else "on every peer it reaches"
        return (
            f"unoffloading {namespace} deletes its twin namespace {where} and everything in it "
            "(offloaded pods stop running remotely)"
        )
    reasons = []
    new_selector = _selector(after)
    if new_selector != _selector(before):
        lost = set(on_now) - selects(new_selector)
        if lost:
            reasons.append(
                f"the new cluster selector no longer selects {_clusters(lost)}: Liqo deletes the twin namespace "
                f"of {namespace} there and everything in it"
            )
    old_strategy, new_strategy = _pod_strategy(before), _pod_strategy(after)
    side = stricter(old_strategy, new_strategy)
    if side:
        reasons.append(
            f"the pod offloading strategy goes from {old_strategy} to {new_strategy}: pods running on "
            f"{_SIDE[side]} no longer satisfy it (they run on until they are recreated, then only "
            f"{_OTHER[side]})"
        )
    return "; ".join(reasons) or None


def _virtual_nodes(managed: ManagedRef = None) -> list[tuple[str, str, dict[str, str]]]:
    return list(
        VirtualNode.objects.of(managed).order_by("namespace", "name").values_list("cluster_id", "name", "labels")
    )


def _selector_of(virtual_nodes: list[tuple[str, str, dict[str, str]]]) -> Callable[[Any], set[str]]:
    """``selects`` over ``virtual_nodes``, each distinct selector evaluated once."""
    seen: dict[str, set[str]] = {}

    def selects(selector: Any) -> set[str]:
        key = repr(selector)
        if key not in seen:
            picked = liqo_peers.select_clusters(selector, virtual_nodes, terms=False)
            seen[key] = {cluster_id for cluster_id, entry in picked.items() if entry["selected"]}
        return seen[key]

    return selects


def is_destructive(namespace: Namespace, action: str, spec: dict[str, Any] | None) -> str | None:
    """Why changing ``namespace`` as it is in the snapshot by ``action`` (ChangeAction: offload, update
    or unoffload) to ``spec`` is destructive, or None when it is not (the rule: module docstring)."""
    if not namespace.offloaded:
        return None
    on_now = set(namespace.cluster_states.filter(selected=True).values_list("cluster_id", flat=True))
    before = namespace.offloading_spec or {}
    return destructive_reason(
        namespace.name, action, before, spec, on_now, _selector_of(_virtual_nodes(namespace.managed_id))
    )


def destructive_changes(changes: list[ChangeRequest]) -> dict[str, str]:
    """For the (unsaved) changes of a bulk request (of one managed cluster, the first change's): why each
    destructive one is, by namespace. Two queries whatever their number; a change says what it was based
    on (``base_spec``: None when the namespace was not offloaded)."""
    names = [c.namespace for c in changes if c.base_spec is not None]
    if not names:
        return {}
    managed = changes[0].managed_id
    on_now: dict[str, set[str]] = {}
    rows = ClusterOffloading.objects.of(managed).filter(namespace__name__in=names, selected=True)
    for name, cluster_id in rows.values_list("namespace__name", "cluster_id"):
        on_now.setdefault(name, set()).add(cluster_id)
    selects = _selector_of(_virtual_nodes(managed))
    found = {}
    for change in changes:
        why = destructive_reason(
            change.namespace,
            change.action,
            change.base_spec,
            change.desired_spec,
            on_now.get(change.namespace, set()),
            selects,
        )
        if why:
            found[change.namespace] = why
    return found
