"""Each managed cluster's condition as this installation sees it (issue 28): its snapshot's age and whether
it is stale, its API server's breaker, whether a watcher keeps its snapshot, what discovery last found.

One reading for the three places that tell it: ``/metrics`` (a series per cluster), ``/readyz`` (the
``clusters`` detail of its body) and the pages' banner (under ``/m/<name>/`` that cluster's; on pages
across the fleet the clusters that are out, by name). Reading it costs two queries (the clusters and
their snapshot states) and two cache reads per cluster, whatever the fleet size: never per namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from offloading.cluster import breaker
from offloading.models import ManagedCluster, SnapshotState
from offloading.snapshot.refresh import watcher_keeps_snapshot


@dataclass(frozen=True)
class ClusterCondition:
    """One managed cluster, read once. ``age_seconds`` is None before its first successful refresh."""

    pk: int
    name: str
    is_default: bool
    health: str  # discovery's (ManagedCluster.health): reachable, unreachable or unknown
    last_success_at: datetime | None
    age_seconds: float | None
    refresh_failed: bool
    stale: bool
    outage: breaker.Outage | None
    watcher_alive: bool

    @property
    def reachable(self) -> bool:
        """Its API server's breaker is closed (a request to it got an answer, or none failed yet)."""
        return self.outage is None

    @property
    def out(self) -> bool:
        """Whether a page should say so: its API server unreachable, or its snapshot stale."""
        return not self.reachable or self.stale

    def describe(self) -> str:
        """In words, naming the cluster: "milan unreachable since 10:02", "milan stale since 10:02",
        "milan has no snapshot yet", "rome fine"."""
        if self.outage is not None:
            return f"{self.name} unreachable since {timezone.localtime(self.outage.since):%H:%M}"
        if self.stale and self.last_success_at is None:
            return f"{self.name} has no snapshot yet"
        if self.stale and self.last_success_at is not None:
            return f"{self.name} stale since {timezone.localtime(self.last_success_at):%H:%M}"
        return f"{self.name} fine"


def conditions(now: datetime | None = None) -> list[ClusterCondition]:
    """Every managed cluster's condition, the default first, then by name."""
    now = now or timezone.now()
    clusters = list(ManagedCluster.objects.order_by("-is_default", "name").only("pk", "name", "is_default", "health"))
    states = {state.managed_id: state for state in SnapshotState.objects.filter(managed__in=clusters)}
    found = []
    for cluster in clusters:
        state = states.get(cluster.pk)
        success = state.last_success_at if state is not None else None
        found.append(
            ClusterCondition(
                pk=cluster.pk,
                name=cluster.name,
                is_default=cluster.is_default,
                health=cluster.health,
                last_success_at=success,
                age_seconds=max(0.0, (now - success).total_seconds()) if success is not None else None,
                refresh_failed=state.last_refresh_failed if state is not None else False,
                stale=state.is_stale(now) if state is not None else True,
                outage=breaker.outage(cluster),
                watcher_alive=watcher_keeps_snapshot(cluster),
            )
        )
    return found


def summary(found: list[ClusterCondition]) -> str:
    """The banner's line across the fleet: the clusters that are out first, then the others as fine
    ("milan unreachable since 10:02; rome fine"); empty when none is out."""
    out = [c for c in found if c.out]
    if not out:
        return ""
    return "; ".join(c.describe() for c in out + [c for c in found if not c.out])
