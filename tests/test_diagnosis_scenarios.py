"""Each stuck-state rule, produced for real in the sandbox (its simulated Liqo, faults and admin
endpoints), read back the way the watcher reads the cluster (a relist of every watched kind), and
diagnosed: the rule fires with its explanation and fix on the namespace in trouble, and never on a
healthy offloaded namespace next to it (``alpha``, Ready on florence).

The "stuck for N minutes" rules are tested by lowering LIQO_DASH_DIAGNOSIS_STUCK_MINUTES, not by
waiting: first not stuck yet at the default, then stuck once the threshold is 0."""

from __future__ import annotations

import json
import shlex
import subprocess
import urllib.request
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from liqo_rules.constants import GROUP, PLURAL, SCHEDULING_LABEL, VERSION
from offloading.cluster import kube
from offloading.insight.diagnosis import Finding, diagnose
from offloading.models import Namespace
from offloading.models.inventory import Pod
from offloading.snapshot import informer
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers pods and events
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.django_db

# The order the watcher lists in (each kind after those its rows refer to).
KINDS = ("namespaces", "namespaceoffloadings", "foreignclusters", "virtualnodes", "nodes", "pods", "events")
MILAN = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south-1"]}]}
    ]
}
FLORENCE = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["europe-west8"]}]}
    ]
}


def sync_snapshot(kinds: tuple[str, ...] = KINDS) -> None:
    """What the watcher does at a (re)list: every kind, page by page, then the rows of unseen objects go."""
    now = timezone.now()
    for kind in kinds:
        sync = informer.SYNCED[kind]
        seen: set[str] = set()
        for items, _ in kube.list_pages(kind):
            sync.apply([("ADDED", obj) for obj in items], now, relist=True)
            seen |= {sync.key(obj) for obj in items}
        sync.relisted(seen, now)


def _offload(k8s: Any, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading", "metadata": {"name": "offloading"}}
    k8s.custom.create_namespaced_custom_object(GROUP, VERSION, name, PLURAL, {**body, "spec": spec})


def _phase(sandbox: Any, name: str) -> str:
    obj = sandbox.get("namespaceoffloadings.offloading.liqo.io", name, "offloading") or {}
    return str((obj.get("status") or {}).get("offloadingPhase") or "")


def _findings(name: str) -> dict[str, Finding]:
    return {f.rule: f for f in diagnose(Namespace.objects.get(name=name))}


def _stuck_after(settings: Any, minutes: float) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "DIAGNOSIS_STUCK_MINUTES": minutes}


@pytest.fixture
def control(sandbox: Any, k8s: Any) -> str:
    """A healthy offloaded namespace: Ready on florence, pods allowed remote, the scheduling label set."""
    _offload(k8s, "alpha", {"podOffloadingStrategy": "LocalAndRemote", "clusterSelector": FLORENCE})
    sandbox.wait_idle(10)
    assert _phase(sandbox, "alpha") == "Ready"
    return "alpha"


def _healthy(control: str) -> None:
    assert _findings(control) == {}, "the healthy control must have no finding"


def test_the_healthy_control_has_no_finding_even_at_a_zero_threshold(
    sandbox: Any, k8s: Any, control: str, settings: Any
) -> None:
    _stuck_after(settings, 0)
    k8s.core.create_namespaced_pod(
        "alpha",
        {
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
        },
    )
    sandbox.wait_idle(10)
    sync_snapshot()
    assert Pod.objects.get(namespace="alpha", name="web").phase == "Running"
    assert Namespace.objects.get(name="alpha").labels.get(SCHEDULING_LABEL) == "true"
    _healthy(control)


def test_a_selector_that_matches_no_cluster(sandbox: Any, k8s: Any, control: str) -> None:
    us_east = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-east-1"]}]}
        ]
    }
    _offload(k8s, "beta", {"clusterSelector": us_east})
    sandbox.wait_idle(10)
    assert _phase(sandbox, "beta") == "NoClusterSelected"
    sync_snapshot()
    finding = _findings("beta")["no-cluster"]
    assert "matches no peered cluster" in finding.title
    assert "The closest is" in finding.explanation and "us-east-1" in finding.explanation
    assert "loosen the selector" in finding.action
    _healthy(control)


def test_not_ready_for_too_long_names_each_clusters_reason(sandbox: Any, k8s: Any, control: str, settings: Any) -> None:
    sandbox.faults.set(peer_down=["milan"])  # milan never answers: its remote namespace is never created
    _offload(k8s, "beta", {"clusterSelector": {"nodeSelectorTerms": []}})
    sandbox.wait_idle(10)
    assert _phase(sandbox, "beta") == "InProgress"
    sync_snapshot()
    assert "not-ready" not in _findings("beta"), "not stuck yet at the default threshold"
    _stuck_after(settings, 0)
    finding = _findings("beta")["not-ready"]
    assert finding.title == "InProgress for more than 0 minutes" and finding.severity == "bad"
    assert "milan: Creating – The remote namespace is being created" in finding.explanation
    assert "florence" not in finding.explanation, "florence has its remote namespace"
    _healthy(control)
    sandbox.faults.set(peer_down=[])  # the peer is back: Ready, nothing stuck any more
    wait_until(lambda: _phase(sandbox, "beta") == "Ready", 60, message="beta Ready")
    sync_snapshot()
    assert "not-ready" not in _findings("beta")


def test_a_remote_namespace_name_taken_on_a_peer(sandbox: Any, k8s: Any, control: str) -> None:
    # Someone created "beta-rome" in milan (the admin endpoint, over HTTP): DefaultName needs that name.
    request = urllib.request.Request(
        f"{sandbox.url}/sandbox/peers",
        data=json.dumps({"cluster": "milan", "namespaces": ["beta-rome"]}).encode(),
        method="PATCH",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert "beta-rome" in json.load(answer)["milan"]
    _offload(k8s, "beta", {"namespaceMappingStrategy": "DefaultName", "clusterSelector": MILAN})
    sandbox.wait_idle(10)
    assert _phase(sandbox, "beta") == "AllFailed"
    sync_snapshot()
    finding = _findings("beta")["creation-loop-backoff"]
    assert finding.title == "The remote namespace cannot be created on milan"
    assert '"beta-rome"' in finding.explanation and "already exists on the peer" in finding.explanation
    assert "SelectedName" in finding.action
    _healthy(control)


def test_terminating_for_too_long_names_the_peer_that_holds_it(
    sandbox: Any, k8s: Any, control: str, settings: Any
) -> None:
    _offload(k8s, "beta", {"clusterSelector": {"nodeSelectorTerms": []}})
    sandbox.wait_idle(10)
    assert _phase(sandbox, "beta") == "Ready"
    sandbox.faults.set(peer_down=["milan"])  # its remote namespace cannot be deleted: Liqo's finalizer stays
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, "beta", PLURAL, "offloading")
    sandbox.wait_idle(10)
    held = sandbox.get("namespaceoffloadings.offloading.liqo.io", "beta", "offloading")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    sync_snapshot()
    assert Namespace.objects.get(name="beta").offloading_deleting
    assert "terminating" not in _findings("beta")
    _stuck_after(settings, 0)
    finding = _findings("beta")["terminating"]
    assert finding.explanation.endswith("still held on milan."), finding.explanation
    assert "reachable" in finding.action
    _healthy(control)
    sandbox.faults.set(peer_down=[])
    wait_until(lambda: sandbox.get("namespaceoffloadings.offloading.liqo.io", "beta", "offloading") is None, 60)
    sync_snapshot()
    assert _findings("beta") == {}, "no longer offloaded: nothing to diagnose"


def test_the_offloading_module_of_a_selected_peer_turns_unhealthy(sandbox: Any, k8s: Any, control: str) -> None:
    _offload(k8s, "beta", {"clusterSelector": MILAN})
    sandbox.wait_idle(10)
    sandbox.liqo.set_peer("milan", offloading_healthy=False)
    sandbox.wait_idle(10)
    sync_snapshot()
    finding = _findings("beta")["peer-unhealthy"]
    assert finding.title == "The offloading module of milan is unhealthy"
    assert "peer's page" in finding.action
    _healthy(control)  # alpha is on florence only
    sandbox.liqo.set_peer("milan", offloading_healthy=True)
    sandbox.wait_idle(10)
    sync_snapshot()
    assert "peer-unhealthy" not in _findings("beta")


def test_a_stale_observed_generation_while_liqos_controller_is_down(sandbox: Any, k8s: Any, control: str) -> None:
    _offload(k8s, "beta", {"clusterSelector": MILAN})
    sandbox.wait_idle(10)
    sandbox.faults.set(controller_down=True)
    k8s.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "beta", PLURAL, "offloading", {"spec": {"podOffloadingStrategy": "Remote"}}
    )
    sandbox.wait_idle(10)
    sync_snapshot()
    finding = _findings("beta")["generation-stale"]
    assert "observedGeneration is 1, the spec is at generation 2" in finding.explanation
    assert "controller manager" in finding.action
    _healthy(control)
    sandbox.faults.set(controller_down=False)
    wait_until(
        lambda: (
            (sandbox.get("namespaceoffloadings.offloading.liqo.io", "beta", "offloading") or {})
            .get("status", {})
            .get("observedGeneration")
            == 2
        ),
        60,
        message="the controller to catch up",
    )
    sync_snapshot()
    assert "generation-stale" not in _findings("beta")


def test_the_scheduling_label_removed_by_hand_and_its_fix(sandbox: Any, k8s: Any, control: str) -> None:
    _offload(k8s, "beta", {"podOffloadingStrategy": "LocalAndRemote", "clusterSelector": MILAN})
    sandbox.wait_idle(10)
    k8s.core.patch_namespace("beta", {"metadata": {"labels": {SCHEDULING_LABEL: None}}})
    sandbox.wait_idle(10)
    sync_snapshot()
    finding = _findings("beta")["scheduling-label"]
    assert finding.title == f"The namespace lacks {SCHEDULING_LABEL}=true"
    command = finding.action[finding.action.index("kubectl") :]
    assert command == f"kubectl label ns beta {SCHEDULING_LABEL}=true"
    _healthy(control)
    # The fix, as the page words it.
    done = subprocess.run(
        [*shlex.split(command), f"--kubeconfig={sandbox.kubeconfig_path}"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    sync_snapshot()
    assert "scheduling-label" not in _findings("beta")


def test_pods_pending_for_room_but_not_for_an_affinity_no_node_matches(
    sandbox: Any, k8s: Any, control: str, admin_client: Any
) -> None:
    _offload(k8s, "beta", {"podOffloadingStrategy": "Remote", "clusterSelector": MILAN})
    sandbox.wait_idle(10)
    big = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "48", "memory": "1Gi"}}}
    k8s.core.create_namespaced_pod("beta", {"metadata": {"name": "big"}, "spec": {"containers": [big]}})
    # In the control, a pod pinned to a local node while its pods must run remote: Pending, but for
    # its affinity, not for room (Remote imposes virtual nodes).
    pinned = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["rome-worker-1"]}]}
            ]
        }
    }
    k8s.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", PLURAL, "offloading", {"spec": {"podOffloadingStrategy": "Remote"}}
    )
    sandbox.wait_idle(10)
    k8s.core.create_namespaced_pod(
        "alpha",
        {
            "metadata": {"name": "pinned"},
            "spec": {"containers": [{"name": "c", "image": "x"}], "affinity": {"nodeAffinity": pinned}},
        },
    )
    sandbox.wait_idle(10)
    sync_snapshot()
    pod = Pod.objects.get(namespace="beta", name="big")
    assert pod.phase == "Pending" and "Insufficient cpu" in pod.reason, pod.reason
    pinned_pod = Pod.objects.get(namespace="alpha", name="pinned")
    assert pinned_pod.phase == "Pending" and "Unschedulable" in pinned_pod.reason
    assert "Insufficient" not in pinned_pod.reason, pinned_pod.reason
    finding = _findings("beta")["pods-no-room"]
    assert finding.title == "1 pod pending: no selected node has room"
    assert "(big: Insufficient cpu)" in finding.explanation
    assert "lower the pods' requests" in finding.action
    _healthy(control)
    page = admin_client.get(reverse("offloading:namespace_detail", args=["beta"])).content.decode()
    assert 'id="diagnosis"' in page and "no selected node has room" in page and "<em>Fix:</em>" in page
