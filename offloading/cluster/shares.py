"""A watcher replica's share of the managed clusters (issue 28): one coordination.k8s.io Lease per
managed cluster, each taken and renewed with ``offloading.cluster.leader.LeaderElector``, so replicas
split the clusters between them and a replica that dies hands its clusters over within the lease.

All leases live in LEADER_LEASE_NAMESPACE on the installation's home API server (the process's own
client, as the single leader lease always did):

- a cluster's lease is ``<LEADER_LEASE_NAME>-<cluster>``, except the default cluster's, which keeps
  ``<LEADER_LEASE_NAME>``: a single-cluster install, and a rolling upgrade from one, keep the one lease
  and the one writer of the default cluster's snapshot;
- each replica also holds a membership lease, ``<LEADER_LEASE_NAME>.replica-<n>`` (a slot: the lowest
  free or expired one, created when all are taken). Replicas count one another from these, so a replica
  that holds no cluster yet is still counted. Slots are never deleted, so reading them in order up to
  the first missing one finds every replica with get, create and update only (the watcher's Role).

Every round (``ClusterShares.round``, about five times a lease) a replica renews its slot and the
clusters it holds, reads the others' leases, and then, with R live replicas and C clusters:

- releases clusters above ceil(C / R); and one cluster a round above floor(C / R) while a live replica
  holds fewer than floor(C / R) and no cluster is free (so a replica that joins gets its share: the
  clusters move within a round or two);
- takes free or expired clusters up to floor(C / R), and up to ceil(C / R) when no replica is short of
  floor(C / R) or when the cluster has been free for a whole lease (nobody else took it).

Which clusters a replica takes first and releases last follows rendezvous hashing of (cluster,
identity): replicas try different clusters first instead of all racing for the same one, and a
conflict on a lease's resourceVersion leaves it to one of them. Expiry is judged, as in leader.py, by
when this process saw a lease last change on its own monotonic clock: clock skew between replicas does
not matter. ``release_all`` on a clean shutdown hands everything over at once.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from offloading.cluster import kube
from offloading.cluster.leader import LeaderElector, Look

log = logging.getLogger(__name__)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# More membership slots than this are not read (a runaway scale-out would not make rounds endless).
MAX_REPLICAS = 64


def cluster_lease_name(base: str, cluster: str, default: str) -> str:
    """The Lease of one managed cluster: the default cluster keeps the single leader lease's name. A
    cluster name that is no DNS label (slugs may hold "_" and capitals) gets a hash of it appended, so
    that two names never share a lease."""
    if cluster == default:
        return base
    label = cluster.lower().replace("_", "-").strip("-")
    if label != cluster or not _DNS_LABEL.match(label):
        label = f"{label}-{hashlib.sha256(cluster.encode()).hexdigest()[:8]}".strip("-")
    return f"{base}-{label}"


def member_lease_name(base: str, slot: int) -> str:
    """A replica's membership slot: a "." keeps it apart from every cluster lease (slugs have none)."""
    return f"{base}.replica-{slot}"


def preference(cluster: str, identity: str) -> int:
    """Rendezvous weight of (cluster, replica): the higher, the more this replica wants the cluster."""
    return int.from_bytes(hashlib.sha256(f"{cluster}\0{identity}".encode()).digest()[:8], "big")


@dataclass
class Round:
    """What one round left: the clusters held now, those gained and lost in it, the live replicas."""

    held: set[str]
    gained: set[str]
    lost: set[str]
    replicas: int


@dataclass
class ClusterShares:
    base: str
    namespace: str
    identity: str
    lease_seconds: int = 15
    clock: Callable[[], float] = time.monotonic
    default: str = ""
    # Called with a cluster's name before its lease is released (not when it is lost to another): the
    # watcher stops writing that cluster's snapshot first, so two replicas never write it at once. It
    # returns whether nothing writes it any more; if something still does (a batch longer than the
    # wait), the lease is not released but left to expire.
    before_release: Callable[[str], bool] = lambda name: True
    held: set[str] = field(default_factory=set)
    _clusters: dict[str, LeaderElector] = field(default_factory=dict)
    _slots: dict[int, LeaderElector] = field(default_factory=dict)
    _slot: int | None = None
    _free_since: dict[str, float] = field(default_factory=dict)

    def _release(self, name: str) -> None:
        stopped = self.before_release(name)
        self.held.discard(name)
        if stopped:
            self._clusters[name].release()
        else:
            log.warning("watcher shares: %s still writes cluster %s: its lease is left to expire", self.identity, name)

    def holds_now(self, name: str) -> bool:
        """Whether this replica holds ``name``'s lease and renewed it within the renew deadline."""
        elector = self._clusters.get(name)
        return name in self.held and elector is not None and elector.holds_now()

    def _elector(self, name: str) -> LeaderElector:
        return LeaderElector(name, self.namespace, self.identity, self.lease_seconds, clock=self.clock)

    @property
    def clusters(self) -> list[str]:
        return list(self._clusters)

    def set_clusters(self, names: Iterable[str], default: str | None = None) -> set[str]:
        """The managed clusters to share (read again from the database now and then). A cluster no
        longer managed is released; returns those this replica held and no longer does."""
        if default is not None and default != self.default:
            for name in sorted(self.held):  # the default's lease name changes: start over under the new names
                self._release(name)
            self._clusters = {}
            self.default = default
        wanted = list(dict.fromkeys(names))
        dropped = set()
        for name in [name for name in self._clusters if name not in wanted]:
            if name in self.held:
                self._release(name)
                dropped.add(name)
            del self._clusters[name]
            self._free_since.pop(name, None)
        for name in wanted:
            if name not in self._clusters:
                self._clusters[name] = self._elector(cluster_lease_name(self.base, name, self.default))
        return dropped

    # -- membership ---------------------------------------------------------------------------------
    def _members(self) -> set[str]:
        """Renew this replica's slot (or claim one) and return the identities of the live replicas,
        this one included."""
        live = {self.identity}
        if self._slot is not None and not self._slots[self._slot].try_acquire_or_renew():
            log.warning("watcher shares: %s lost its membership slot %s", self.identity, self._slot)
            self._slot = None
        for slot in range(MAX_REPLICAS):
            if slot == self._slot:
                continue
            elector = self._slots.setdefault(slot, self._elector(member_lease_name(self.base, slot)))
            try:
                seen = elector.look()
            except kube.KubeError as exc:
                log.warning("watcher shares: cannot read membership slot %s: %s", slot, exc.message)
                break
            mine = seen.holder == self.identity  # ours still, e.g. after an API outage made us step down
            if seen.holder and not seen.expired and not mine:
                live.add(seen.holder)
            elif self._slot is None and elector.try_acquire_or_renew(seen):
                self._slot = slot
                log.info("watcher shares: %s is replica slot %s", self.identity, slot)
            if seen.lease is None:
                break  # slots are made in order: none past the first missing one
        return live

    # -- one round ----------------------------------------------------------------------------------
    def round(self) -> Round:
        """Renew, release and take leases as the module says; returns what this replica holds now."""
        before = set(self.held)
        # Renew what is held first (a failed renewal within the renew deadline still holds: leader.py):
        # the membership reads below take a request per replica, and must not delay the renewals.
        for name in sorted(self.held):
            if not self._clusters[name].try_acquire_or_renew():
                self.held.discard(name)
        live = self._members()
        total = len(self._clusters)
        high = math.ceil(total / len(live)) if total else 0
        low = total // len(live)
        # Read the others: who holds what, which are free.
        holders: dict[str, int] = dict.fromkeys(live, 0)
        holders[self.identity] = len(self.held)
        free: dict[str, Look] = {}
        now = self.clock()
        for name, elector in self._clusters.items():
            if name in self.held:
                continue
            try:
                seen = elector.look()
            except kube.KubeError as exc:
                log.warning("watcher shares: cannot read the lease of cluster %s: %s", name, exc.message)
                continue
            if seen.free or seen.holder == self.identity:  # ours still, e.g. after an API outage: renew it
                free[name] = seen
                self._free_since.setdefault(name, now)
            else:
                self._free_since.pop(name, None)
                if seen.holder in holders:
                    holders[seen.holder] += 1
        short = any(count < low for who, count in holders.items() if who != self.identity)
        keep = high
        if short and not free and len(self.held) <= high:
            keep = max(low, len(self.held) - 1)  # one a round: every replica above the floor gives one
        mine = sorted(self.held, key=lambda name: preference(name, self.identity))
        while len(self.held) > keep:
            self._release(mine.pop(0))  # the least wanted first
        for name in sorted(free, key=lambda name: -preference(name, self.identity)):
            waited = now - self._free_since.get(name, now) >= self.lease_seconds
            limit = high if (not short or waited) else low
            if len(self.held) >= limit:
                continue
            if self._clusters[name].try_acquire_or_renew(free[name]):
                self.held.add(name)
                self._free_since.pop(name, None)
        return Round(set(self.held), self.held - before, before - self.held, len(live))

    def release_all(self) -> None:
        """A clean shutdown: give up every cluster and the membership slot, so that others take them at
        their next round instead of after the lease."""
        for name in sorted(self.held):
            self._release(name)
        if self._slot is not None:
            self._slots[self._slot].release()
            self._slot = None
