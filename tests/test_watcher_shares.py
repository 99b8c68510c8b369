"""Watcher replicas share the managed clusters through one Lease per cluster (issue 28,
offloading.cluster.shares): against the sandbox's real Lease API, replicas driven round by round with
their own injected clocks (skewed on purpose) split the clusters, take over a dead one's within the
lease, give a joining one its share, hand over at once on a clean release, and never hold a cluster
twice. The last test runs two real ``manage.py watch_cluster`` processes against a sandbox domain."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.cluster import kube
from offloading.cluster.leader import LeaderElector
from offloading.cluster.shares import ClusterShares, cluster_lease_name, member_lease_name

NAMESPACE = "default"
BASE = "watcher"
LEASE = 10
ROUND = 2.0  # the watcher renews five times a lease
CLUSTERS = ["rome", "milan", "naples"]


class Clock:
    """A monotonic clock with its own origin: replicas' clocks need not agree."""

    def __init__(self, world: World, offset: float) -> None:
        self.world, self.offset = world, offset

    def __call__(self) -> float:
        return self.world.now + self.offset


class World:
    """Replicas sharing the clusters, driven round by round; after every replica's round it checks that
    no cluster is held by two live replicas and that each held cluster's Lease names its holder."""

    def __init__(self, clusters: list[str]) -> None:
        self.now = 0.0
        self.clusters = clusters
        self.replicas: dict[str, ClusterShares] = {}
        self.dead: set[str] = set()

    def join(self, identity: str, offset: float) -> ClusterShares:
        shares = ClusterShares(BASE, NAMESPACE, identity, LEASE, clock=Clock(self, offset))
        shares.set_clusters(self.clusters, default=self.clusters[0])
        self.replicas[identity] = shares
        return shares

    def live(self) -> list[ClusterShares]:
        return [r for name, r in self.replicas.items() if name not in self.dead]

    def step(self, rounds: int = 1) -> None:
        for _ in range(rounds):
            for replica in self.live():
                replica.round()
                self.check()
            self.now += ROUND

    def check(self) -> None:
        seen: dict[str, str] = {}
        for replica in self.live():
            for cluster in replica.held:
                assert cluster not in seen, f"{cluster} held by {seen[cluster]} and {replica.identity}"
                seen[cluster] = replica.identity
                lease = kube.get_lease(NAMESPACE, cluster_lease_name(BASE, cluster, self.clusters[0]))
                assert lease is not None and lease["spec"]["holderIdentity"] == replica.identity

    def split(self) -> dict[str, int]:
        return {r.identity: len(r.held) for r in self.live()}

    def held(self) -> set[str]:
        return set().union(*(r.held for r in self.live()))


def test_lease_names_keep_the_default_on_the_single_leader_lease_and_never_collide() -> None:
    assert cluster_lease_name("liqo-dash-watcher", "rome", "rome") == "liqo-dash-watcher"
    assert cluster_lease_name("liqo-dash-watcher", "milan", "rome") == "liqo-dash-watcher-milan"
    odd = {cluster_lease_name("w", name, "rome") for name in ("a_b", "a-b", "A-b")}
    assert len(odd) == 3 and all(name == name.lower() and "_" not in name for name in odd)
    assert member_lease_name("w", 0) == "w.replica-0"  # slugs have no ".": never a cluster's lease


def test_release_hands_the_lease_over_at_once_like_client_go(sandbox: Any) -> None:
    world = World(["x"])
    a = LeaderElector("handover", NAMESPACE, "a", lease_seconds=LEASE, clock=Clock(world, 0))
    b = LeaderElector("handover", NAMESPACE, "b", lease_seconds=LEASE, clock=Clock(world, 5000))
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    assert b.release() is False  # not b's to release
    assert a.release() is True and not a.leading
    lease = kube.get_lease(NAMESPACE, "handover")
    assert lease is not None and lease["spec"]["holderIdentity"] == "" and lease["spec"]["leaseTransitions"] == 0
    assert b.try_acquire_or_renew() is True  # no wait for the lease to expire
    lease = kube.get_lease(NAMESPACE, "handover")
    assert lease is not None and lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert a.try_acquire_or_renew() is False


def test_two_replicas_split_three_clusters_and_the_survivor_takes_all_within_the_lease(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a = world.join("replica-a", offset=0)
    world.step()
    assert a.held == set(CLUSTERS)  # alone: all of them
    b = world.join("replica-b", offset=987_654.0)  # another machine's monotonic clock
    world.step(2)
    assert sorted(world.split().values()) == [1, 2] and world.held() == set(CLUSTERS)
    world.step(5)  # stable: nobody gives up or takes anything more
    assert sorted(world.split().values()) == [1, 2]

    world.dead.add(b.identity)  # b stops renewing (killed)
    lost = set(b.held)
    killed = world.now
    while a.held != set(CLUSTERS):
        before = set(a.held)
        world.step()
        assert world.now - killed <= LEASE + 2 * ROUND, "a took b's clusters only after the lease and a round"
        assert before <= a.held, "a never gave up its own clusters meanwhile"
    took = world.now - killed
    assert took > LEASE, f"b's clusters {lost} were taken after {took} s, before its lease expired"


def test_a_replica_that_joins_gets_a_share_and_a_clean_release_hands_over_at_once(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a, b = world.join("a", 0), world.join("b", -300.0)
    world.step(3)
    assert sorted(world.split().values()) == [1, 2]
    c = world.join("c", 42.0)
    world.step(2)
    assert world.split() == {"a": 1, "b": 1, "c": 1}, "the third replica got a share within two rounds"
    world.step(5)
    assert world.split() == {"a": 1, "b": 1, "c": 1}

    gone = next(iter(c.held))
    c.release_all()  # a clean shutdown
    world.dead.add(c.identity)
    world.step(1)  # no time for a lease to expire: the released lease is free at once
    assert gone in world.held() and world.held() == set(CLUSTERS)
    assert sorted(world.split().values()) == [1, 2]
    assert kube.get_lease(NAMESPACE, member_lease_name(BASE, 2))["spec"]["holderIdentity"] == ""
    for replica in (a, b):
        replica.release_all()
    for cluster in CLUSTERS:
        assert kube.get_lease(NAMESPACE, cluster_lease_name(BASE, cluster, "rome"))["spec"]["holderIdentity"] == ""


@pytest.mark.parametrize(("clusters", "replicas", "split"), [(4, 3, [1, 1, 2]), (5, 2, [2, 3]), (2, 3, [0, 1, 1])])
def test_every_replica_gets_at_least_the_floor_of_its_share(
    sandbox: Any, clusters: int, replicas: int, split: list[int]
) -> None:
    world = World([f"cluster-{n}" for n in range(clusters)])
    for n in range(replicas):
        world.join(f"r{n}", offset=1000.0 * n)
        world.step(1)  # one after the other: the first takes everything, the others must get theirs
    world.step(4)
    assert sorted(world.split().values()) == split and world.held() == set(world.clusters)
    moved = {r.identity: set(r.held) for r in world.live()}
    world.step(5)
    assert {r.identity: set(r.held) for r in world.live()} == moved, "settled: no cluster moves any more"


def test_a_managed_cluster_dropped_from_the_list_is_released(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a = world.join("a", 0)
    world.step()
    assert a.set_clusters(["rome", "milan"]) == {"naples"}
    assert a.held == {"rome", "milan"}
    assert kube.get_lease(NAMESPACE, cluster_lease_name(BASE, "naples", "rome"))["spec"]["holderIdentity"] == ""
