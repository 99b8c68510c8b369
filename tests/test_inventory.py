"""Pods and Events in the snapshot (the watcher's pods and events kinds), and on the pages: where each
pod of an offloaded namespace runs, and Liqo's Warning events first."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from liqo_rules.constants import GROUP, PLURAL, VERSION
from offloading.cluster import kube
from offloading.models.inventory import KubeEvent, Pod
from offloading.snapshot import informer
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers pods and events
from offloading.snapshot.refresh import refresh
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.django_db


def _sync(kind: str) -> None:
    sync = informer.SYNCED[kind]
    seen: set[str] = set()
    for items, _ in kube.list_pages(kind):
        sync.apply([("ADDED", obj) for obj in items], timezone.now(), relist=True)
        seen |= {sync.key(obj) for obj in items}
    sync.relisted(seen, timezone.now())


def _offload(k8s: Any, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading", "metadata": {"name": "offloading"}}
    k8s.custom.create_namespaced_custom_object(GROUP, VERSION, name, PLURAL, {**body, "spec": spec})


def test_pods_of_offloaded_namespaces_are_kept_with_where_they_run(sandbox: Any, k8s: Any, admin_client: Any) -> None:
    for name in ("remote-app", "plain-app"):
        k8s.core.create_namespace({"metadata": {"name": name}})
    _offload(k8s, "remote-app", {"podOffloadingStrategy": "Remote"})
    wait_until(
        lambda: (k8s.core.read_namespace("remote-app").metadata.labels or {}).get("liqo.io/scheduling-enabled"), 60
    )
    pod = {
        "metadata": {"name": "web"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]
        },
    }
    k8s.core.create_namespaced_pod("remote-app", pod)
    k8s.core.create_namespaced_pod("plain-app", pod)
    refresh()
    # Bound first, then Running (the scheduler's and the kubelet's writes): Running is the later of the two.
    wait_until(
        lambda: (k8s.core.read_namespaced_pod("web", "remote-app").status.phase or "") == "Running",
        60,
        message="scheduled and running",
    )
    _sync("pods")
    kept = Pod.objects.get()
    assert (kept.namespace, kept.name) == ("remote-app", "web"), "only offloaded namespaces are followed"
    assert kept.cluster_id, f"the pod runs on a peer's virtual node ({kept.node_name})"
    assert (kept.cpu_millis, kept.memory_bytes) == (250, 64 * 1024 * 1024)
    page = admin_client.get("/namespaces/remote-app/").content.decode()
    assert 'id="pods"' in page and f'<span class="chip info">{kept.cluster_id}</span>' in page
    listing = admin_client.get("/namespaces/?q=remote-app").content.decode()
    assert kept.phase == "Running" and '<td class="opt">0 / 1</td>' in listing
    # Deleted in the cluster: gone from the snapshot at the next relist.
    k8s.core.delete_namespaced_pod("web", "remote-app")
    wait_until(lambda: not k8s.core.list_namespaced_pod("remote-app").items, 60)
    _sync("pods")
    assert not Pod.objects.exists()


def test_liqos_warning_about_an_invalid_selector_shows_first(sandbox: Any, k8s: Any, admin_client: Any) -> None:
    k8s.core.create_namespace({"metadata": {"name": "broken"}})
    bad = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["big"]}]}]}
    _offload(k8s, "broken", {"clusterSelector": bad})
    refresh()

    def warned() -> bool:
        _sync("events")
        return KubeEvent.objects.filter(namespace="broken", type="Warning").exists()

    wait_until(warned, 60, message="Liqo's Warning event")
    event = KubeEvent.objects.get(namespace="broken", type="Warning")
    assert event.involved_kind == "NamespaceOffloading"
    page = admin_client.get("/namespaces/broken/").content.decode()
    assert '<span class="badge warn">Warning</span>' in page and event.reason in page
    listing = admin_client.get("/namespaces/?q=broken").content.decode()
    assert "1 warning" in listing
