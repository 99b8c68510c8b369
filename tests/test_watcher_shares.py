"""Watcher replicas share the managed clusters through one Lease per cluster (issue 28,
offloading.cluster.shares): against the sandbox's real Lease API, replicas driven round by round with
their own injected clocks (skewed on purpose) split the clusters, take over a dead one's within the
lease, give a joining one its share, hand over at once on a clean release, and never hold a cluster
twice. The last test runs two real ``manage.py watch_cluster`` processes against a sandbox domain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from offloading.cluster import kube
from offloading.cluster.leader import LeaderElector
from offloading.cluster.shares import ClusterShares, cluster_lease_name, member_lease_name
from sandbox.domain import Domain
from tests.fixtures.celery import database_url
from tests.fixtures.waits import ROOT

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
        self.api_out = False  # during an outage check() cannot read the leases either

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
                if self.api_out:
                    continue
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


def test_an_api_outage_drops_every_cluster_before_anyone_could_take_it_and_they_come_back(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a, b = world.join("a", 0), world.join("b", 77.0)
    world.step(3)
    split = {r.identity: set(r.held) for r in world.live()}
    sandbox.faults.set(outage=True)
    world.api_out = True
    try:
        world.step(3)  # 6 s < two thirds of the lease: both keep writing what they hold
        assert {r.identity: set(r.held) for r in world.live()} == split
        world.step(1)  # 8 s without a renewal: both stop before the lease (10 s) could expire for anyone
        assert a.held == set() and b.held == set()
    finally:
        sandbox.faults.clear()
        world.api_out = False
    world.step(1)  # their leases still name them: each renews its own at once
    assert {r.identity: set(r.held) for r in world.live()} == split


def test_a_replica_that_lost_track_of_its_slot_takes_the_same_one_back(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a = world.join("a", 0)
    world.join("b", 10.0)
    world.step(2)
    slot = a._slot
    a._slot = None  # as when its renewal failed past the deadline while the lease still names it
    world.step(1)
    assert a._slot == slot and kube.get_lease(NAMESPACE, member_lease_name(BASE, 2)) is None
    assert sorted(world.split().values()) == [1, 2]


def test_a_managed_cluster_dropped_from_the_list_is_released(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a = world.join("a", 0)
    world.step()
    assert a.set_clusters(["rome", "milan"]) == {"naples"}
    assert a.held == {"rome", "milan"}
    assert kube.get_lease(NAMESPACE, cluster_lease_name(BASE, "naples", "rome"))["spec"]["holderIdentity"] == ""


def test_a_cluster_still_written_is_not_released_but_left_to_expire(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a = world.join("a", 0)
    a.before_release = lambda name: name != "naples"  # naples' writer is still in the middle of a batch
    world.step()
    assert a.set_clusters(["rome", "milan"]) == {"naples"}
    lease = kube.get_lease(NAMESPACE, cluster_lease_name(BASE, "naples", "rome"))
    assert lease["spec"]["holderIdentity"] == "a"  # not handed over while something of a's writes it
    assert "naples" not in a.held  # and no longer renewed: it expires


def test_a_replica_holds_a_cluster_now_only_within_its_renew_deadline(sandbox: Any) -> None:
    world = World(CLUSTERS)
    a = world.join("a", 0)
    world.step()
    assert a.held == set(CLUSTERS) and all(a.holds_now(name) for name in CLUSTERS)
    world.now += LEASE * 2 / 3  # no round meanwhile: the process stalled (paused, starved, slow API)
    assert not any(a.holds_now(name) for name in CLUSTERS)
    world.step()
    assert all(a.holds_now(name) for name in CLUSTERS)


# -- two real watcher processes on a sandbox domain -----------------------------------------------------
E2E_LEASE = 4  # seconds; the watchers renew every second (a fifth of it, at least one)
LEASE_BASE = "liqo-dash-watcher"


@pytest.fixture
def domain_watchers(transactional_db: Any, settings: Any, tmp_path: Path) -> Iterator[Any]:
    """A sandbox domain of three clusters and a way to start ``manage.py watch_cluster`` processes with
    what a user sets: LIQO_DASH_CLUSTERS naming the kubeconfig's contexts, leader election on."""
    procs: dict[str, subprocess.Popen[bytes]] = {}
    with Domain("domain:" + ",".join(CLUSTERS), controller_delay=0.0, port=0) as dom:
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig")  # its current context: rome
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()  # this process reads the leases on rome, the installation's home API
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
            "DATABASE_URL": database_url(),
            "KUBECONFIG": str(kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
            "LIQO_DASH_CLUSTERS": ",".join(CLUSTERS),
            "LIQO_DASH_LEADER_ELECTION": "true",
            "LIQO_DASH_LEADER_LEASE_SECONDS": str(E2E_LEASE),
            "LIQO_DASH_LEADER_LEASE_NAMESPACE": NAMESPACE,
            "LIQO_DASH_VAR_DIR": str(django_settings.VAR_DIR),
            "LIQO_DASH_LOCAL_CACHE": "true",
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "INSECURE_HTTP": "true",
            "PYTHONUNBUFFERED": "1",
        }

        def start(name: str) -> subprocess.Popen[bytes]:
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
            procs[name] = subprocess.Popen(
                [sys.executable, "manage.py", "watch_cluster"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
            return procs[name]

        def log(name: str) -> str:
            path = tmp_path / f"{name}.log"
            return path.read_text(errors="replace") if path.exists() else ""

        def until(predicate: Any, timeout: float, what: str) -> None:
            """wait_until, failing with the leases and every watcher's log."""
            deadline = time.monotonic() + timeout
            while not predicate():
                if time.monotonic() > deadline:
                    logs = "\n".join(f"--- {name}\n{log(name)[-4000:]}" for name in procs)
                    pytest.fail(f"timed out after {timeout}s waiting for {what}; leases {holders()}\n{logs}")
                time.sleep(0.2)

        try:
            yield type(
                "Watchers", (), {"start": staticmethod(start), "log": staticmethod(log), "until": staticmethod(until)}
            )
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                proc.wait(10)
            kube.reset_client()


def holders() -> dict[str, str]:
    """Each managed cluster's lease holder, as the home API server has it ("" when free or missing)."""
    found = {}
    for cluster in CLUSTERS:
        lease = kube.get_lease(NAMESPACE, cluster_lease_name(LEASE_BASE, cluster, CLUSTERS[0]))
        found[cluster] = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
    return found


def by_process(procs: dict[str, subprocess.Popen[bytes]]) -> dict[str, set[str]]:
    """Which clusters each process holds (identities end with the process id)."""
    now = holders()
    return {name: {c for c, who in now.items() if who.endswith(f"-{proc.pid}")} for name, proc in procs.items()}


def test_two_watcher_processes_split_a_domain_and_one_takes_over_when_the_other_is_killed(
    domain_watchers: Any,
) -> None:
    began = time.monotonic()
    first = domain_watchers.start("first")
    procs = {"first": first}
    domain_watchers.until(lambda: by_process(procs)["first"] == set(CLUSTERS), 30, "the first watcher to hold all")
    domain_watchers.until(lambda: "watching" in domain_watchers.log("first"), 10, "the default cluster's engine")
    second = domain_watchers.start("second")
    procs["second"] = second

    def split() -> bool:
        held = by_process(procs)
        return sorted(len(h) for h in held.values()) == [1, 2] and held["first"] | held["second"] == set(CLUSTERS)

    domain_watchers.until(split, 30, "the two watchers to split the three clusters 2/1")
    time.sleep(3 * E2E_LEASE / 5)
    assert split(), "the split holds: nobody fights over the leases"

    # Kill the one that runs rome's engine: the survivor must take its clusters and start that engine.
    victim, survivor = ("first", "second") if CLUSTERS[0] in by_process(procs)["first"] else ("second", "first")
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait(10)
    killed = time.monotonic()
    alive = {survivor: procs[survivor]}
    domain_watchers.until(lambda: by_process(alive)[survivor] == set(CLUSTERS), 20, "the survivor to hold all")
    took = time.monotonic() - killed
    assert took <= E2E_LEASE + 3, f"takeover after {took:.1f} s (lease {E2E_LEASE} s)"
    domain_watchers.until(lambda: "watching" in domain_watchers.log(survivor), 10, "the survivor to run rome's engine")

    # A clean stop (SIGTERM, as a pod is stopped) releases every lease at once.
    procs[survivor].send_signal(signal.SIGTERM)
    domain_watchers.until(lambda: procs[survivor].poll() is not None, 20, "the survivor to stop")
    assert procs[survivor].returncode == 0
    assert holders() == dict.fromkeys(CLUSTERS, ""), domain_watchers.log(survivor)
    print(
        f"\nwatcher replicas: takeover of a killed replica's clusters after {took:.1f} s (lease {E2E_LEASE} s); "
        f"whole test {time.monotonic() - began:.0f} s"
    )
