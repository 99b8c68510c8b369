"""Only one watcher writes the snapshot: leader election with a coordination.k8s.io Lease, and the
takeover by a second watcher process when the leader is killed."""

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
from offloading.models import Namespace
from offloading.snapshot.refresh import refresh
from tests.fixtures.celery import database_url
from tests.fixtures.waits import ROOT, wait_until

GROUP, VERSION, PLURAL = "offloading.liqo.io", "v1beta1", "namespaceoffloadings"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_leader_at_a_time_and_a_takeover_only_after_the_lease_expired(sandbox: Any) -> None:
    clock_a, clock_b = FakeClock(), FakeClock()
    a = LeaderElector("watcher", "default", "a", lease_seconds=15, clock=clock_a)
    b = LeaderElector("watcher", "default", "b", lease_seconds=15, clock=clock_b)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    clock_b.now += 10
    assert a.try_acquire_or_renew() is True  # a renews: b sees the lease change and waits again
    assert b.try_acquire_or_renew() is False
    clock_b.now += 14
    assert b.try_acquire_or_renew() is False  # 14 s since b saw the last renewal: not expired yet
    clock_b.now += 2
    assert b.try_acquire_or_renew() is True  # a stopped renewing 16 s ago (by b's clock)
    lease = kube.get_lease("default", "watcher")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert a.try_acquire_or_renew() is False  # a sees b hold it and steps down at once


def test_a_leader_keeps_leading_through_an_api_blip_until_its_renew_deadline(sandbox: Any) -> None:
    clock = FakeClock()
    a = LeaderElector("blip", "default", "a", lease_seconds=15, clock=clock)
    assert a.try_acquire_or_renew() is True
    sandbox.faults.set(outage=True)
    try:
        clock.now += 5
        assert a.try_acquire_or_renew() is True  # 5 s < 10 s (two thirds of the lease)
        clock.now += 6
        assert a.try_acquire_or_renew() is False  # 11 s without a renewal: step down
    finally:
        sandbox.faults.clear()


@pytest.fixture
def watchers(transactional_db: Any, sandbox: Any, tmp_path: Path) -> Iterator[Any]:
    procs: dict[str, subprocess.Popen[bytes]] = {}
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
        "DATABASE_URL": database_url(),
        "KUBECONFIG": str(sandbox.kubeconfig_path),
        "KUBE_CONFIG_MODE": "kubeconfig",
        "LIQO_DASH_VAR_DIR": str(django_settings.VAR_DIR),
        "LIQO_DASH_LOCAL_CACHE": "true",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "INSECURE_HTTP": "true",
        "LIQO_DASH_LEADER_LEASE_SECONDS": "5",
        "LIQO_DASH_LEADER_LEASE_NAMESPACE": "default",
        "PYTHONUNBUFFERED": "1",
    }

    def start(name: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "watch_cluster"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        procs[name] = proc
        return proc

    def log(name: str) -> str:
        path = tmp_path / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    try:
        yield type("Watchers", (), {"start": staticmethod(start), "log": staticmethod(log), "procs": procs})
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def test_the_second_watcher_takes_over_within_the_lease_when_the_leader_is_killed(
    watchers: Any, sandbox: Any, k8s: Any
) -> None:
    assert refresh().ok
    first = watchers.start("first")
    wait_until(lambda: "watching" in watchers.log("first"), 30, message="the first watcher to lead")
    second = watchers.start("second")
    wait_until(lambda: "leader election" in watchers.log("second"), 30, message="the second watcher to start")
    holder = kube.get_lease("default", "liqo-dash-watcher")["spec"]["holderIdentity"]
    assert holder.endswith(f"-{first.pid}")
    assert "watching" not in watchers.log("second"), "only the leader watches"

    first.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: "watching" in watchers.log("second"), 20, message="the second watcher to take over")
    took = time.monotonic() - killed
    assert took <= 15, f"takeover after {took:.1f} s"
    assert kube.get_lease("default", "liqo-dash-watcher")["spec"]["holderIdentity"].endswith(f"-{second.pid}")

    # The new leader writes the snapshot: an offloading made elsewhere shows up.
    k8s.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "after-takeover"}})
    assert refresh().ok
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "after-takeover",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {},
        },
    )
    wait_until(
        lambda: Namespace.objects.filter(name="after-takeover", offloaded=True).exists(),
        60,
        message="the new leader to write the offloading into the snapshot",
    )
    print(f"\nleader takeover after SIGKILL: {took:.1f} s (lease 5 s)")
