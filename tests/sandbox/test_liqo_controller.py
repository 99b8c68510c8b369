"""The simulated Liqo controller: convergence per mapping and pod strategy, conditions, finalizer flow."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from sandbox import Sandbox
from sandbox.kinds import NAMESPACE_MAPS
from tests.fixtures.waits import wait_until
from tests.sandbox.conftest import GROUP, NSOFF, VERSION, Clients, expr, selector

EU_SOUTH = selector([expr("topology.kubernetes.io/region", "In", "eu-south-1")])


def converged(kube: Clients, namespace: str) -> dict[str, Any]:
    kube.sb.wait_idle(10)
    return kube.get_nsoff(namespace)


def conditions(obj: dict[str, Any], cluster: str) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in obj["status"]["remoteNamespacesConditions"][cluster]]


def test_default_name_converges_to_ready_with_liqos_conditions(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"clusterSelector": EU_SOUTH})
    obj = converged(kube, "alpha")
    status = obj["status"]
    assert status["offloadingPhase"] == "Ready"
    assert status["remoteNamespaceName"] == "alpha-rome"
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert conditions(obj, "milan") == [
        ("OffloadingRequired", "True", "ClusterSelected"),
        ("Ready", "True", "NamespaceCreated"),
    ]
    assert (
        obj["status"]["remoteNamespacesConditions"]["milan"][1]["message"]
        == "Namespace correctly offloaded to the remote cluster"
    )
    assert conditions(obj, "florence") == [("OffloadingRequired", "False", "ClusterNotSelected")]
    assert obj["metadata"]["finalizers"] == ["namespaceoffloading-controller.liqo.io/finalizer"]
    remote = kube.sb.remote_namespaces("milan")["alpha-rome"]
    assert remote["metadata"]["annotations"] == {
        "liqo.io/managed-by-namespace-map": "liqo-tenant-milan/milan",
        "liqo.io/original-name": "alpha",
    }
    assert remote["metadata"]["labels"]["liqo.io/remote-cluster-id"] == "rome"
    assert "alpha-rome" not in kube.sb.remote_namespaces("florence")
    nm = kube.sb.store.get(NAMESPACE_MAPS, "liqo-tenant-milan", "milan")
    assert nm["spec"]["desiredMapping"] == {"alpha": "alpha-rome"}
    assert nm["status"]["currentMapping"] == {"alpha": {"remoteNamespace": "alpha-rome", "phase": "Accepted"}}
    managers = {(m["manager"], m.get("subresource", "")) for m in obj["metadata"]["managedFields"]}
    assert ("liqo-controller-manager", "status") in managers and ("liqo-controller-manager", "") in managers


def test_an_empty_selector_selects_every_cluster(kube: Clients) -> None:
    kube.create_nsoff("beta")
    obj = converged(kube, "beta")
    assert obj["status"]["offloadingPhase"] == "Ready"
    assert all(conditions(obj, c)[1] == ("Ready", "True", "NamespaceCreated") for c in ("milan", "florence"))


def test_enforce_same_name_conflicts_with_an_existing_remote_namespace(kube: Clients) -> None:
    kube.create_nsoff("gamma", {"namespaceMappingStrategy": "EnforceSameName"})
    obj = converged(kube, "gamma")
    assert obj["status"]["remoteNamespaceName"] == "gamma"
    assert obj["status"]["offloadingPhase"] == "SomeFailed"
    assert conditions(obj, "milan")[1] == ("Ready", "False", "CreationLoopBackOff")
    assert conditions(obj, "florence")[1] == ("Ready", "True", "NamespaceCreated")
    assert "liqo.io/managed-by-namespace-map" not in (
        kube.sb.remote_namespaces("milan")["gamma"]["metadata"].get("annotations") or {}
    )


def test_a_remote_namespace_created_by_someone_else_conflicts(kube: Clients) -> None:
    kube.sb.add_remote_namespace("florence", "delta", {"owner": "someone"})
    kube.create_nsoff("delta", {"namespaceMappingStrategy": "EnforceSameName"})
    obj = converged(kube, "delta")
    assert obj["status"]["offloadingPhase"] == "SomeFailed"
    assert conditions(obj, "florence")[1] == ("Ready", "False", "CreationLoopBackOff")


def test_enforce_same_name_with_only_the_conflicting_cluster_is_all_failed(kube: Clients) -> None:
    kube.create_nsoff("gamma", {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": EU_SOUTH})
    assert converged(kube, "gamma")["status"]["offloadingPhase"] == "AllFailed"


def test_selected_name_uses_the_given_remote_name(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "team-alpha"})
    obj = converged(kube, "alpha")
    assert obj["status"]["remoteNamespaceName"] == "team-alpha"
    assert "team-alpha" in kube.sb.remote_namespaces("milan") and "team-alpha" in kube.sb.remote_namespaces("florence")


def test_an_invalid_remote_name_ends_in_creation_loop_backoff(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "Not_Valid"})
    assert converged(kube, "alpha")["status"]["offloadingPhase"] == "AllFailed"


def test_no_matching_cluster_is_no_cluster_selected(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"clusterSelector": selector([expr("topology.kubernetes.io/region", "In", "mars")])})
    obj = converged(kube, "alpha")
    assert obj["status"]["offloadingPhase"] == "NoClusterSelected"
    assert conditions(obj, "milan") == [("OffloadingRequired", "False", "ClusterNotSelected")]


@pytest.mark.parametrize(("strategy", "labelled"), [("LocalAndRemote", True), ("Remote", True), ("Local", False)])
def test_the_pod_strategy_drives_the_scheduling_label(kube: Clients, strategy: str, labelled: bool) -> None:
    kube.create_nsoff("alpha", {"podOffloadingStrategy": strategy})
    converged(kube, "alpha")
    labels = kube.core.read_namespace("alpha").metadata.labels
    assert (labels.get("liqo.io/scheduling-enabled") == "true") is labelled


@pytest.mark.parametrize(("strategy", "where"), [("Local", {"local"}), ("Remote", {"virtual"})])
def test_pods_are_placed_according_to_the_pod_strategy(kube: Clients, strategy: str, where: set[str]) -> None:
    kube.create_nsoff("delta", {"podOffloadingStrategy": strategy})
    converged(kube, "delta")
    for i in range(6):
        kube.core.create_namespaced_pod(
            "delta", {"metadata": {"name": f"web-{i}"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        )
    kube.sb.wait_idle(10)
    virtual = {n.metadata.name for n in kube.core.list_node(label_selector="liqo.io/type=virtual-node").items}
    pods = [p for p in kube.core.list_namespaced_pod("delta").items if p.metadata.name.startswith("web-")]
    assert all(p.status.phase == "Running" for p in pods)
    assert {("virtual" if p.spec.node_name in virtual else "local") for p in pods} == where


def test_an_invalid_selector_records_a_warning_event_and_selects_nothing(kube: Clients) -> None:
    bad = selector([expr("topology.kubernetes.io/region", "In")])  # In without values
    kube.create_nsoff("alpha", {"clusterSelector": bad})
    obj = converged(kube, "alpha")
    assert obj["status"]["offloadingPhase"] == "NoClusterSelected"
    assert "liqo.io/scheduling-enabled" not in kube.core.read_namespace("alpha").metadata.labels
    events = kube.core.list_namespaced_event(
        "alpha", field_selector=f"involvedObject.name=offloading,involvedObject.uid={obj['metadata']['uid']}"
    ).items
    assert [(e.type, e.reason) for e in events] == [("Warning", "Invalid")]
    assert events[0].message.startswith("Invalid ClusterSelector: ")


def test_changing_virtual_node_labels_re_evaluates_selectors(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"clusterSelector": selector([expr("tier", "In", "gold")])})
    assert converged(kube, "alpha")["status"]["offloadingPhase"] == "NoClusterSelected"
    kube.core.patch_node("florence", {"metadata": {"labels": {"tier": "gold"}}})
    obj = converged(kube, "alpha")
    assert obj["status"]["offloadingPhase"] == "Ready"
    assert conditions(obj, "florence")[0] == ("OffloadingRequired", "True", "ClusterSelected")
    kube.core.patch_node("florence", {"metadata": {"labels": {"tier": None}}})
    obj = converged(kube, "alpha")
    assert obj["status"]["offloadingPhase"] == "NoClusterSelected"
    assert "alpha-rome" not in kube.sb.remote_namespaces("florence")
    # Liqo only updates Ready while a cluster is required or mapped, so the last one stays (status.go)
    assert conditions(obj, "florence") == [
        ("OffloadingRequired", "False", "ClusterNotSelected"),
        ("Ready", "False", "Terminating"),
    ]


def test_virtual_node_spec_labels_reach_the_node_and_the_selection(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"clusterSelector": selector([expr("zone", "In", "north")])})
    assert converged(kube, "alpha")["status"]["offloadingPhase"] == "NoClusterSelected"
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "liqo-tenant-milan", "virtualnodes", "milan", {"spec": {"labels": {"zone": "north"}}}
    )
    obj = converged(kube, "alpha")
    assert kube.core.read_node("milan").metadata.labels["zone"] == "north"
    assert obj["status"]["offloadingPhase"] == "Ready"
    assert conditions(obj, "milan")[0] == ("OffloadingRequired", "True", "ClusterSelected")


def test_deselecting_a_cluster_tears_down_its_remote_namespace(kube: Clients) -> None:
    kube.create_nsoff("alpha")
    converged(kube, "alpha")
    assert "alpha-rome" in kube.sb.remote_namespaces("florence")
    obj = kube.get_nsoff("alpha")
    obj["spec"]["clusterSelector"] = EU_SOUTH
    kube.custom.replace_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "offloading", obj)
    obj = converged(kube, "alpha")
    assert "alpha-rome" not in kube.sb.remote_namespaces("florence")
    assert obj["status"]["offloadingPhase"] == "Ready"
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 2


def test_deleting_runs_the_terminating_flow_and_removes_the_finalizer(kube: Clients) -> None:
    kube.create_nsoff("alpha")
    converged(kube, "alpha")
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "offloading")
    kube.sb.wait_idle(10)
    with pytest.raises(ApiException) as exc:
        kube.get_nsoff("alpha")
    assert exc.value.status == 404
    assert "alpha-rome" not in kube.sb.remote_namespaces("milan")
    assert "liqo.io/scheduling-enabled" not in kube.core.read_namespace("alpha").metadata.labels
    nm = kube.sb.store.get(NAMESPACE_MAPS, "liqo-tenant-milan", "milan")
    assert "alpha" not in (nm["spec"].get("desiredMapping") or {})
    assert "alpha" not in (nm.get("status", {}).get("currentMapping") or {})


def test_terminating_is_visible_with_a_slow_controller(tmp_path: Any) -> None:
    # A delay that keeps Terminating on screen for seconds: a read on a slow, busy machine still sees it.
    with Sandbox(scenario="minimal", controller_delay=1.0) as sb:
        kube = Clients(sb, sb.write_kubeconfig(tmp_path / "kc"))
        kube.create_nsoff("alpha")
        sb.wait_idle(60)
        assert kube.get_nsoff("alpha")["status"]["offloadingPhase"] == "Ready"
        kube.custom.delete_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "offloading")
        phases, mapping_phases = set(), set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                obj = kube.get_nsoff("alpha")
            except ApiException:
                break
            assert obj["metadata"]["deletionTimestamp"]
            phases.add(obj["status"]["offloadingPhase"])
            for conds in (obj["status"].get("remoteNamespacesConditions") or {}).values():
                mapping_phases |= {c["reason"] for c in conds if c["type"] == "Ready"}
            time.sleep(0.05)  # sampling interval: the loop records every phase it sees until the deletion
        else:
            pytest.fail("the NamespaceOffloading was never deleted")
        assert "Terminating" in phases
        assert "Terminating" in mapping_phases
        kube.api_client.close()


def test_deleting_the_namespace_honours_the_finalizer(tmp_path: Any) -> None:
    # Slow enough that the offloading stays held by the finalizer for seconds, long enough to be seen.
    with Sandbox(scenario="minimal", controller_delay=1.0) as sb:
        kube = Clients(sb, sb.write_kubeconfig(tmp_path / "kc"))
        kube.create_nsoff("beta")
        sb.wait_idle(60)
        kube.core.delete_namespace("beta")
        namespace = kube.core.read_namespace("beta")
        assert namespace.status.phase == "Terminating" and namespace.metadata.deletion_timestamp

        def deleted_content() -> tuple[str, dict[str, Any]] | None:
            # The namespace first: while its NamespaceOffloading exists it cannot be gone, so if the
            # offloading read after it is still held, the namespace was Terminating all along.
            phase = kube.core.read_namespace("beta").status.phase
            obj = kube.get_nsoff("beta")
            return (phase, obj) if obj["metadata"].get("deletionTimestamp") else None

        # The namespace controller deletes the content; Liqo's finalizer holds the offloading.
        phase, held = wait_until(deleted_content, 60, interval=0.02, message="the namespace controller")
        assert held["metadata"]["finalizers"] == ["namespaceoffloading-controller.liqo.io/finalizer"]
        assert phase == "Terminating"
        sb.wait_idle(60)
        with pytest.raises(ApiException) as exc:
            kube.core.read_namespace("beta")
        assert exc.value.status == 404
        assert "beta-rome" not in sb.remote_namespaces("milan")
        kube.api_client.close()


def test_controller_delay_makes_convergence_asynchronous(tmp_path: Any) -> None:
    with Sandbox(scenario="minimal", controller_delay=3.0) as sb:
        kube = Clients(sb, sb.write_kubeconfig(tmp_path / "kc"))
        created = kube.create_nsoff("alpha")
        assert "status" not in created
        # "Nothing happens for a while" is the behaviour under test: well within the 3 s delay (ample on a
        # slow machine too), a later read still has no status.
        time.sleep(0.2)
        assert "status" not in kube.get_nsoff("alpha")
        sb.wait_idle(60)
        assert kube.get_nsoff("alpha")["status"]["offloadingPhase"] == "Ready"
        kube.api_client.close()
