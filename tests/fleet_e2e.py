"""The whole installation of issue 28 for the end-to-end tests with several managed clusters: a sandbox
domain served by ``python -m sandbox serve --scenario domain:...`` in its own process, a real Redis, a
Celery worker and beat, and ``manage.py watch_cluster`` replicas as the Procfile runs them, every process
managing the domain's clusters through its kubeconfig contexts (``LIQO_DASH_CLUSTERS``). This process is
the web (pytest-django's live server, or the test client) on the same settings.

The ``start_fleet`` fixture (a plugin of tests/conftest.py) starts it: ``start_fleet(["rome", "milan"],
watchers=2)``; what is started is stopped at the end of the test. Checks on a cluster go to that
cluster's own API server: ``kubectl --context <cluster> --kubeconfig <the domain's kubeconfig>``, or the
official kubernetes client of that context."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from liqo_dash.celery import app as celery_app
from offloading.cluster import kube
from offloading.cluster import managed as managedclient
from offloading.cluster.shares import cluster_lease_name
from offloading.models import ManagedCluster
from offloading.models.managed import ensure_configured
from tests import webproc
from tests.conftest import ROOT, Processes, _reset_producers, database_url, wait_until

LEASE_SECONDS = 4  # the watchers renew every second; a killed replica's clusters are free after this
LEASE_BASE = "liqo-dash-watcher"
LEASE_NAMESPACE = "default"


class Fleet:
    """A running installation over a sandbox domain: its clusters' rows, kubectl and clients per cluster,
    the domain's faults, and the worker, beat and watcher processes (their logs in failure messages)."""

    def __init__(self, clusters: list[str], kubeconfig: Path, urls: dict[str, str], procs: Processes) -> None:
        self.clusters = clusters
        self.kubeconfig = kubeconfig
        self.urls = urls
        self.procs = procs
        self.watchers: dict[str, subprocess.Popen[bytes]] = {}
        self.managed = {row.context: row for row in ManagedCluster.objects.filter(context__in=clusters)}
        self._clients = {
            name: k8s_config.new_client_from_config(config_file=str(kubeconfig), context=name) for name in clusters
        }

    # -- the clusters' own API servers ---------------------------------------------------------------
    def kubectl(self, cluster: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "--context", cluster, *args],
            capture_output=True,
            text=True,
            timeout=30,
        )

    def offloading(self, cluster: str, namespace: str) -> dict[str, Any] | None:
        """The NamespaceOffloading of ``namespace`` as ``kubectl get`` shows it in ``cluster`` (None: none)."""
        done = self.kubectl(cluster, "get", "namespaceoffloading", "offloading", "-n", namespace, "-o", "json")
        if done.returncode != 0:
            assert "NotFound" in done.stderr, done.stderr
            return None
        return dict(json.loads(done.stdout))

    def core(self, cluster: str) -> k8s_client.CoreV1Api:
        return k8s_client.CoreV1Api(self._clients[cluster])

    def create_namespace(self, cluster: str, name: str, labels: dict[str, str] | None = None) -> None:
        """A namespace made in ``cluster``'s API, with the official client."""
        self.core(cluster).create_namespace({"metadata": {"name": name, "labels": labels or {}}})

    def label_namespace(self, cluster: str, name: str, labels: dict[str, str]) -> None:
        self.core(cluster).patch_namespace(name, {"metadata": {"labels": labels}})

    def faults(self, cluster: str, **faults: Any) -> None:
        """Set ``cluster``'s faults (``outage=True``) through its ``/sandbox/faults``; none: clear them."""
        url = self.urls[cluster].rstrip("/") + "/sandbox/faults"
        if faults:
            body = json.dumps(faults).encode()
            request = urllib.request.Request(
                url, data=body, method="PATCH", headers={"Content-Type": "application/json"}
            )
        else:
            request = urllib.request.Request(url, method="DELETE")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

    def lease_holders(self) -> dict[str, str]:
        """Each cluster's watcher lease holder, as the home API server (the default cluster's) has it."""
        found = {}
        for cluster in self.clusters:
            try:
                lease = k8s_client.CoordinationV1Api(self._clients[self.clusters[0]]).read_namespaced_lease(
                    cluster_lease_name(LEASE_BASE, cluster, self.clusters[0]), LEASE_NAMESPACE
                )
                found[cluster] = str(lease.spec.holder_identity or "")
            except ApiException as exc:
                if exc.status != 404:
                    raise
                found[cluster] = ""
        return found

    def held_by(self, name: str) -> set[str]:
        """The clusters watcher ``name`` holds (a replica's identity ends with its process id)."""
        pid = self.watchers[name].pid
        return {cluster for cluster, who in self.lease_holders().items() if who.endswith(f"-{pid}")}

    # -- processes -----------------------------------------------------------------------------------
    def start_watcher(self, name: str) -> subprocess.Popen[bytes]:
        """``manage.py watch_cluster`` (the Procfile's watcher) with the others' environment."""
        log = open(self.procs.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "watch_cluster"],
            cwd=ROOT,
            env=self.procs.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.watchers[name] = proc
        return proc

    def kill_watcher(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.watchers[name]
        proc.send_signal(sig)
        proc.wait(20)

    def logs(self) -> str:
        names = [*self.procs.procs, *self.watchers, "sandbox"]
        return "\n".join(f"--- {name}\n{self.procs.log(name)[-3000:]}" for name in names)

    def until(self, predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
        """Poll ``predicate`` until it is truthy; fail after ``timeout`` s with the leases and every log."""
        return wait_until(predicate, timeout, interval, lambda: f"{what}; leases {self.lease_holders()}\n{self.logs()}")

    def close(self) -> None:
        """Stop every process at once (a clean stop: the watchers release their leases), then wait."""
        procs = [*self.watchers.values(), *self.procs.procs.values()]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs.procs.clear()
        for api in self._clients.values():
            api.close()


def _serve_domain(clusters: list[str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, dict[str, str]]:
    """``python -m sandbox serve`` of the domain, each cluster on a free port; its kubeconfig and URLs."""
    kubeconfig = tmp_path / "domain.kubeconfig"
    log_path = tmp_path / "sandbox.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sandbox", "serve", "--scenario", "domain:" + ",".join(clusters), "--port", "0"]
            + ["--kubeconfig", str(kubeconfig), "--controller-delay", "0"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    urls: dict[str, str] = {}
    while len(urls) < len(clusters):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the sandbox domain did not start:\n{log_path.read_text(errors='replace')}")
        time.sleep(0.1)
        for line in log_path.read_text(errors="replace").splitlines():
            words = line.split()  # "sandbox rome listening on http://127.0.0.1:PORT"
            if len(words) == 5 and words[0] == "sandbox" and words[2] == "listening":
                urls[words[1]] = words[4]
    return proc, kubeconfig, urls


@pytest.fixture
def start_fleet(
    transactional_db: Any, redis_url: str, tmp_path: Path, settings: Any, fresh_clients: None
) -> Iterator[Callable[..., Fleet]]:
    """``start_fleet(clusters, watchers=1)``: the domain, the rows of its clusters (the first the
    default), a Celery worker and beat, and ``watchers`` watcher replicas, all on the test database and
    a real Redis; this process enqueues on that Redis and talks to the clusters through the same
    kubeconfig. Returns the :class:`Fleet` once every watcher holds a lease and the worker is ready."""
    started: list[Fleet] = []
    domains: list[subprocess.Popen[bytes]] = []
    saved = {"task_always_eager": celery_app.conf.task_always_eager, "broker_url": celery_app.conf.broker_url}

    def start(clusters: list[str], watchers: int = 1) -> Fleet:
        proc, kubeconfig, urls = _serve_domain(clusters, tmp_path)
        domains.append(proc)
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        settings.LIQO_DASH_CLUSTERS = list(clusters)
        kube.reset_client()
        managedclient.forget_clients()
        ensure_configured()
        celery_app.conf.update(task_always_eager=False, broker_url=redis_url)
        _reset_producers(celery_app)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
            "DATABASE_URL": database_url(),
            "REDIS_URL": redis_url,
            "KUBECONFIG": str(kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
            "LIQO_DASH_CLUSTERS": ",".join(clusters),
            "LIQO_DASH_LEADER_ELECTION": "true",
            "LIQO_DASH_LEADER_LEASE_SECONDS": str(LEASE_SECONDS),
            "LIQO_DASH_LEADER_LEASE_NAMESPACE": LEASE_NAMESPACE,
            "LIQO_DASH_VAR_DIR": str(django_settings.VAR_DIR),
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "LIQO_DASH_LOCAL_CACHE": "false",
            "LIQO_DASH_REFRESH_INTERVAL": "0",  # the rows come from the watchers alone
            "LIQO_DASH_SWEEP_INTERVAL": "1",
            "LIQO_DASH_APPLY_RETRY_BASE": "0.2",
            "LIQO_DASH_DRY_RUN_ON_SUBMIT": "false",
            "INSECURE_HTTP": "true",
            "PYTHONUNBUFFERED": "1",
        }
        fleet = Fleet(list(clusters), kubeconfig, urls, Processes(env, tmp_path))
        started.append(fleet)
        for n in range(watchers):  # started first: their Django start overlaps the worker's
            fleet.start_watcher(f"watcher-{n}")
        fleet.procs.start_beat()
        fleet.procs.start_worker()
        fleet.until(
            lambda: (
                all(fleet.held_by(name) for name in fleet.watchers)
                and set(fleet.lease_holders().values()) != {""}
                and all(fleet.lease_holders().values())
            ),
            40,
            "every watcher to hold a lease and every cluster to be held",
        )
        return fleet

    try:
        yield start
    finally:
        for fleet in started:
            fleet.close()
        for proc in domains:
            webproc.stop(proc)
        celery_app.conf.update(saved)
        _reset_producers(celery_app)
        kube.reset_client()
