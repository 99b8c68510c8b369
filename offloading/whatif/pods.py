"""What a change does to the running pods of a namespace, from the snapshot (``Pod``: only offloaded
namespaces are followed).

* **Lost clusters**: a cluster that loses the namespace gets its remote (twin) namespace deleted by
  Liqo, and every pod running there with it. Unoffloading loses every cluster.
* **A stricter pod strategy**: Liqo's webhook turns the pod offloading strategy into node affinity
  (``liqo_rules.webhook``). Going to ``Remote`` means pods running on local nodes no longer satisfy
  it; going to ``Local`` means pods on virtual nodes no longer do. Node affinity is checked only at
  scheduling (``IgnoredDuringExecution``): such pods keep running until they are recreated, and are then
  placed by the new rule. Pods already counted on a lost cluster are not counted again.

One query for one namespace or for a whole bulk change (running pods grouped by namespace and cluster).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count

from liqo_rules import constants as liqo
from offloading.models.fleet import ManagedRef
from offloading.models.inventory import Pod

LOCAL = ""  # the cluster id of pods on local nodes


@dataclass
class PodImpact:
    """Running pods hit by a change. ``lost`` maps each lost cluster with running pods to their number;
    ``off_strategy`` counts pods that no longer satisfy the new strategy, ``off_where`` says where they
    run ("local" or "remote", "" when the strategy is not stricter)."""

    lost: dict[str, int] = field(default_factory=dict)
    off_strategy: int = 0
    off_where: str = ""
    strategy_before: str = ""
    strategy_after: str = ""
    followed: bool = True  # False: the namespace's pods are not in the snapshot (not offloaded yet)
    # Whether the change could hit pods at all (it loses clusters, changes the strategy or unoffloads).
    risky: bool = False

    @property
    def on_lost_clusters(self) -> int:
        return sum(self.lost.values())

    @property
    def any(self) -> bool:
        return bool(self.on_lost_clusters or self.off_strategy)

    def as_api(self) -> dict[str, Any]:
        return {
            "followed": self.followed,
            "runningOnLostClusters": self.on_lost_clusters,
            "lostClusters": dict(self.lost),
            "offStrategy": self.off_strategy,
            "offStrategyWhere": self.off_where,
            "strategyBefore": self.strategy_before,
            "strategyAfter": self.strategy_after,
        }


def _strategy(spec: dict[str, Any] | None) -> str:
    return str((spec or {}).get("podOffloadingStrategy") or liqo.DEFAULT_POD_STRATEGY)


def stricter(before: str, after: str) -> str:
    """Where running pods stop satisfying the strategy when it changes from ``before`` to ``after``:
    "local" (to Remote), "remote" (to Local), "" (unchanged, or LocalAndRemote which allows both)."""
    if before == after:
        return ""
    if after == liqo.REMOTE:
        return "local"
    if after == liqo.LOCAL:
        return "remote"
    return ""


def pod_impact(
    running: dict[str, int],
    losses: Collection[str],
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    *,
    unoffload: bool = False,
) -> PodImpact:
    """The impact on a namespace whose running pods are ``running`` (cluster id -> count, ``LOCAL`` for
    local nodes), losing ``losses``, going from spec ``before`` to ``after`` (``unoffload``: every
    cluster is lost and no strategy applies any more)."""
    remote = {cid: n for cid, n in running.items() if cid != LOCAL and n}
    if unoffload:
        return PodImpact(lost=dict(sorted(remote.items())), strategy_before=_strategy(before), risky=True)
    lost = {cid: remote[cid] for cid in sorted(losses) if cid in remote}
    old, new = _strategy(before), _strategy(after)
    where = stricter(old, new)
    if where == "local":
        off = running.get(LOCAL, 0)
    elif where == "remote":
        off = sum(n for cid, n in remote.items() if cid not in lost)
    else:
        off = 0
    return PodImpact(
        lost=lost,
        off_strategy=off,
        off_where=where if off else "",
        strategy_before=old,
        strategy_after=new,
        risky=bool(losses) or old != new,
    )


def running_pods(namespaces: Collection[str], managed: ManagedRef = None) -> dict[str, dict[str, int]]:
    """Running pods per namespace of ``managed`` (None: the default cluster) and peer (``LOCAL`` for local
    nodes), in one query."""
    counts: dict[str, dict[str, int]] = {}
    rows = (
        Pod.objects.of(managed)
        .filter(namespace__in=list(namespaces), phase="Running")
        .values_list("namespace", "cluster_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    for namespace, cluster_id, n in rows:
        counts.setdefault(namespace, {})[cluster_id] = n
    return counts
