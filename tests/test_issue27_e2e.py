"""Issue 27 items 5-8 end to end: the ``tenancy`` sandbox scenario (Liqo v1.1.2, florence has cordoned
our tenant, milan's Hard quota, the consumer bologna cordoned here, stuck pods, a DaemonSet on a virtual
node) read through the real kubernetes client as the watcher does, then the rules, pages and diagnosis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from offloading.cluster import kube
from offloading.insight.diagnosis import diagnose
from offloading.models import Cluster, Namespace
from offloading.models.inventory import LiqoResource
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers pods and events
from offloading.snapshot import liqo_resources as _liqoresources  # noqa: F401 - slices, tenants, quotas, version
from offloading.snapshot import resources as resourcesinfo
from sandbox import Sandbox
from tests.fixtures.waits import wait_until
from tests.test_diagnosis_scenarios import sync_snapshot as relist

pytestmark = pytest.mark.django_db

KINDS = (
    "namespaces",
    "namespaceoffloadings",
    "foreignclusters",
    "virtualnodes",
    "nodes",
    "pods",
    "events",
    "resourceslices",
    "tenants",
    "quotas",
    "deployments",
)


def sync_snapshot() -> None:
    relist(KINDS)


@pytest.fixture
def tenancy(tmp_path: Path, settings: Any) -> Iterator[Any]:
    with Sandbox(scenario="tenancy", controller_delay=0.0, port=0) as sb:
        kubeconfig = sb.write_kubeconfig(tmp_path / "kubeconfig")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        sb.wait_idle(20)
        sync_snapshot()
        yield sb
    kube.reset_client()


def test_version_read_from_the_controller_manager(tenancy: Any) -> None:
    assert LiqoResource.objects.filter(kind="deployments").count() == 1
    liqo = resourcesinfo.installed_version()
    assert liqo.version == "v1.1.2" and liqo.orphaned_map_blocks_selection and liqo.liqoctl_many_namespaces
    assert not liqo.autoscaler_type_label


def test_cordoned_provider_refuses_pods(tenancy: Any) -> None:
    florence, milan = (resourcesinfo.admissions(["florence", "milan"])[c] for c in ("florence", "milan"))
    assert florence.refuses and "florence has cordoned this cluster's tenant" in florence.reasons[0]
    assert not milan.refuses and "over this cluster's quota" in milan.reasons[0]
    found = {f.rule: f for f in diagnose(Namespace.objects.get(name="shop"))}
    assert found["peer_refuses_pods"].severity == "bad"
    assert "user is cordoned" in found["stuck_pods"].explanation
    assert "peer_refuses_pods" not in {f.rule for f in diagnose(Namespace.objects.get(name="batch"))}


def test_consumer_tenant_cordoned_here(tenancy: Any) -> None:
    info = resourcesinfo.peer_resources("bologna")
    assert info.tenant_condition == "Cordoned" and info.quota is not None and info.quota.cordoned
    assert info.quota.enforcement == "Soft" and info.tenant_refuses.startswith("cordoned")
    assert [s.action for s in info.providing] == ["Providing"] and info.providing[0].cordoned
    milan = resourcesinfo.peer_resources("milan")
    assert [(s.name, s.action, s.accepted) for s in milan.consuming] == [("milan", "Consuming", True)]


def test_stuck_pods_and_daemonset(tenancy: Any) -> None:
    kinds = {s.name: s.kind for s in resourcesinfo.stuck_pods(Namespace.objects.get(name="legacy"))}
    assert kinds == {"legacy-pinned": "backoff"}
    monitoring = resourcesinfo.stuck_pods(Namespace.objects.get(name="monitoring"))
    assert [(s.name, s.kind) for s in monitoring] == [("node-exporter-milan", "daemonset")]
    assert "patch daemonset node-exporter" in monitoring[0].fix
    batch = {s.name: s for s in resourcesinfo.stuck_pods(Namespace.objects.get(name="batch"))}
    assert set(batch) == {"batch-small"} and "over the quota" in batch["batch-small"].explanation


def test_pages_show_it(tenancy: Any, admin_client: Any) -> None:
    assert Cluster.objects.filter(cluster_id="florence").exists()
    page = admin_client.get(reverse("offloading:cluster_detail", args=["florence"])).content.decode()
    assert "Resources, quota and cordons" in page and "florence refuses new pods from this cluster" in page
    assert "Liqo v1.1.2" in page
    bologna = admin_client.get(reverse("offloading:cluster_detail", args=["bologna"])).content.decode()
    assert "cordoned: its existing resources stay" in bologna
    ns = admin_client.get(reverse("offloading:namespace_detail", args=["monitoring"])).content.decode()
    assert "Stuck pods and DaemonSets on virtual nodes (1)" in ns and "node-exporter-milan" in ns


def test_the_api_says_it_too(tenancy: Any, admin_user: Any) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin_user)
    assert api.get("/api/v1/snapshot/").json()["liqoVersion"] == "v1.1.2"
    florence = api.get("/api/v1/clusters/florence/").json()["resources"]
    assert florence["takesNewPods"] is False
    assert "florence has cordoned this cluster's tenant" in florence["refusalReasons"][0]
    bologna = api.get("/api/v1/clusters/bologna/").json()["resources"]
    assert bologna["tenantCondition"] == "Cordoned" and bologna["quota"]["limitsEnforcement"] == "Soft"
    listed = api.get("/api/v1/clusters/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows and all(row["resources"] is None for row in rows)  # only on a single peer: no N queries


def test_the_preview_says_a_selected_peer_refuses_pods(tenancy: Any, admin_user: Any, admin_client: Any) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin_user)
    body = {"selectors": ["liqo.io/remote-cluster-id in (florence,milan)"]}
    preview = api.post("/api/v1/namespaces/batch/preview/", body, format="json").json()
    assert preview["valid"], preview
    refusing = {row["clusterId"]: row["reasons"] for row in preview["refusingClusters"]}
    assert set(refusing) == {"florence"} and "cordoned" in refusing["florence"][0]
    form = {
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": body["selectors"][0],
        "expected_generation": 0,
    }
    page = admin_client.post(reverse("offloading:namespace_offload_preview", args=["batch"]), form).content.decode()
    assert "selected, but it refuses new pods from this cluster" in page


def test_an_orphaned_namespace_map_blocks_selection_up_to_v11_only(tenancy: Any) -> None:
    from offloading.models.mapping import PeerNamespaceMap

    shop = Namespace.objects.get(name="shop")
    assert "orphaned_namespace_map" not in {f.rule for f in diagnose(shop)}  # as many maps as peers
    PeerNamespaceMap.objects.create(cluster_id="venice", namespace="liqo-tenant-venice", name="venice")
    found = {f.rule: f for f in diagnose(shop)}["orphaned_namespace_map"]
    assert "Liqo v1.1.2 selects no cluster" in found.title and "venice" in found.title
    assert "does not match that of NamespaceMaps" in found.explanation and found.severity == "bad"
    row = LiqoResource.objects.get(kind="deployments")
    row.data = {**row.data, "version": "v1.2.0"}
    row.save()
    assert "orphaned_namespace_map" not in {f.rule for f in diagnose(shop)}  # v1.2 does not count them


def test_the_sandbox_v11_controller_selects_nothing_while_a_namespace_map_is_orphaned(tenancy: Any) -> None:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    from liqo_rules.constants import REMOTE_CLUSTER_ID_LABEL, REMOTE_ID_LABEL, REPLICATION_LABEL

    api = k8s_client.ApiClient(k8s_config.new_client_from_config_dict(tenancy.kubeconfig()).configuration)
    core, custom = k8s_client.CoreV1Api(api), k8s_client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "liqo-tenant-venice"}})
    labels = {REPLICATION_LABEL: "true", REMOTE_ID_LABEL: "venice", REMOTE_CLUSTER_ID_LABEL: "venice"}
    nm = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceMap",
        "metadata": {"name": "venice", "labels": labels},
        "spec": {},
    }
    custom.create_namespaced_custom_object("offloading.liqo.io", "v1beta1", "liqo-tenant-venice", "namespacemaps", nm)
    core.create_namespace({"metadata": {"name": "fresh"}})
    body = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading"},
        "spec": {},
    }
    custom.create_namespaced_custom_object("offloading.liqo.io", "v1beta1", "fresh", "namespaceoffloadings", body)
    wait_until(
        lambda: any(ns == "fresh" and "does not match that of NamespaceMaps" in m for ns, m in tenancy.liqo.swallowed),
        30,
        message="the v1.1 controller to refuse the selection",
    )
    tenancy.wait_idle(10)
    maps = custom.list_cluster_custom_object("offloading.liqo.io", "v1beta1", "namespacemaps")["items"]
    assert not any("fresh" in ((m.get("spec") or {}).get("desiredMapping") or {}) for m in maps)
