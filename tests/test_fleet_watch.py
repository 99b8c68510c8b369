"""A managed cluster's informers (issue 28): the watcher's KindWatcher lists and watches another
cluster's API server through that cluster's own client and writes its rows, as that cluster's, beside
the default cluster's; its outage is not the process's own API server's (the breaker, the changes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from offloading.cluster import breaker, kube
from offloading.cluster import managed as managedclient
from offloading.models import ManagedCluster, Namespace
from offloading.models.managed import Credentials, ensure_configured
from offloading.snapshot.engine import KindWatcher, SnapshotWriter
from sandbox.domain import Domain
from tests.fixtures.waits import free_port


@pytest.fixture
def domain(tmp_path: Path, settings: Any, transactional_db: Any) -> Iterator[tuple[Domain, Path]]:
    managedclient.forget_clients()
    with Domain("domain:rome,milan", controller_delay=0.0, port=0) as dom:
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        yield dom, kubeconfig
        managedclient.forget_clients()
    kube.reset_client()


def _relist(kind: str, writer: SnapshotWriter, api: Any) -> None:
    watcher = KindWatcher(kind, threading.Event(), 5, writer, api=api)
    watcher.relist()


def test_a_managed_clusters_informer_writes_its_own_rows_beside_the_default_clusters(
    domain: tuple[Domain, Path],
) -> None:
    _, kubeconfig = domain
    (default,) = ensure_configured([])
    milan = ManagedCluster.objects.create(name="milan-eu", context="milan")
    milan_api = k8s_config.new_client_from_config(config_file=str(kubeconfig), context="milan")
    try:
        only_in_milan = "milan-only"
        k8s_client.CoreV1Api(milan_api).create_namespace({"metadata": {"name": only_in_milan}})
        stop = threading.Event()
        _relist("namespaces", SnapshotWriter(stop, background=False), None)  # the process's own: rome
        _relist(
            "namespaces", SnapshotWriter(stop, background=False, managed=milan), managedclient.api_client_for(milan)
        )
        rome_names = set(Namespace.objects.filter(managed=default).values_list("name", flat=True))
        milan_names = set(Namespace.objects.filter(managed=milan).values_list("name", flat=True))
        listed = {item.metadata.name for item in k8s_client.CoreV1Api(milan_api).list_namespace().items}
        assert milan_names == listed and only_in_milan in milan_names
        assert only_in_milan not in rome_names and "default" in rome_names & milan_names  # both clusters have it
    finally:
        milan_api.close()


def test_a_managed_clusters_outage_is_not_the_process_api_servers(domain: tuple[Domain, Path], settings: Any) -> None:
    settings.LIQO_DASH_CREDENTIALS_KEY = [Fernet.generate_key().decode()]
    gone = ManagedCluster(name="gone", source="credentials", api_server_url=f"http://127.0.0.1:{free_port()}")
    gone.set_credentials(Credentials(token="t"))
    gone.save()
    stop = threading.Event()
    writer = SnapshotWriter(stop, background=False, managed=gone)
    watcher = KindWatcher("namespaces", stop, 5, writer, api=managedclient.api_client_for(gone))
    watcher.start()
    try:
        deadline = time.monotonic() + 10
        while watcher.lists < 2 and time.monotonic() < deadline:  # a failed list, its backoff, another
            time.sleep(0.1)
        assert watcher.lists >= 2 and not watcher.healthy
        assert breaker.outage() is None  # the process's own API server (rome) is not called down
    finally:
        stop.set()
        watcher.join(10)
