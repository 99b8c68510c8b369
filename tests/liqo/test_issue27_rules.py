"""Versions, resource slices / quotas / cordons and stuck pods (issue 27 items 5-8), with the cases read
in liqotech/liqo: pkg/utils/getters/k8sGetters.go (GetContainerImageVersion), namespaceoffloading-controller/
clusterselector.go at v1.1.2, cmd/liqoctl/cmd/offload.go at v1.0.0 / v1.0.1, pkg/liqoctl/info/peer/auth.go,
quotacreator_controller.go (hasToBeCordoned), pkg/webhooks/shadowpod (webhook.go, spdescription.go,
peeringinfo.go), pkg/virtualKubelet/reflection/workload/pod.go and forge/{pods,events}.go."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from liqo_rules import stuckpods, tenancy, versions
from liqo_rules.stuckpods import PodFacts, classify
from liqo_rules.versions import Release, behaviour, parse_release

# -- versions ---------------------------------------------------------------------------------------


def _deployment(image: str, name: str = "controller-manager", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels if labels is not None else dict(versions.CONTROLLER_MANAGER_LABELS)},
        "spec": {
            "template": {"spec": {"containers": [{"name": "sidecar", "image": "x:9"}, {"name": name, "image": image}]}}
        },
    }


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("ghcr.io/liqotech/liqo-controller-manager:v1.1.2", "v1.1.2"),
        ("registry:5000/liqo/controller-manager:v1.2.0", "v1.2.0"),
        ("liqo-controller-manager", ""),  # "missing version in container image"
        ("a:b:c", "c"),  # the text after the last ':'
        ("", ""),
    ],
)
def test_image_tag_like_liqoctl(image: str, tag: str) -> None:
    assert versions.image_tag(image) == tag
    assert versions.controller_manager_version(_deployment(image)) == tag


def test_version_needs_the_controller_manager_container() -> None:
    assert versions.controller_manager_version(_deployment("x:v1.0.0", name="other")) == ""
    assert versions.controller_manager_version({}) == ""
    assert versions.controller_manager_version({"spec": {"template": {"spec": {}}}}) == ""


def test_controller_manager_labels() -> None:
    assert versions.is_controller_manager(_deployment("x:v1"))
    assert not versions.is_controller_manager(
        _deployment("x:v1", labels={"app.kubernetes.io/name": "controller-manager"})
    )
    assert not versions.is_controller_manager({})
    assert versions.CONTROLLER_MANAGER_SELECTOR == (
        "app.kubernetes.io/name=controller-manager,app.kubernetes.io/component=controller-manager"
    )


@pytest.mark.parametrize(
    ("tag", "release"),
    [
        ("v1.1.2", Release(1, 1, 2)),
        ("1.2.0", Release(1, 2, 0)),
        ("v1.0.0-rc.3", Release(1, 0, 0, "rc.3")),
        (" v1.0.1 ", Release(1, 0, 1)),
        ("e9f4428d32fdf97705a0b9fecb6cda59ccd11e4e", None),
        ("v1.2", None),
        ("v1.2.0x", None),
        ("", None),
    ],
)
def test_parse_release(tag: str, release: Release | None) -> None:
    assert parse_release(tag) == release


def test_prerelease_before_release() -> None:
    assert Release(1, 0, 0, "rc.3").key() < Release(1, 0, 0).key() < Release(1, 0, 1).key()


@pytest.mark.parametrize(
    ("tag", "blocks", "many", "type_label", "terminated"),
    [
        ("v1.0.0-rc.3", True, False, False, False),
        ("v1.0.0", True, False, False, False),
        ("v1.0.1", True, True, False, False),
        ("v1.1.2", True, True, False, False),
        ("v1.2.0-rc.1", True, True, False, False),
        ("v1.2.0", False, True, False, True),
        ("v1.2.1", False, True, True, True),
        ("v1.3.0", False, True, True, True),
        ("master-557c199", False, True, True, True),  # a development build: the newest behaviour
    ],
)
def test_behaviour_per_version(tag: str, blocks: bool, many: bool, type_label: bool, terminated: bool) -> None:
    b = behaviour(tag)
    assert b.orphaned_map_blocks_selection is blocks
    assert b.liqoctl_many_namespaces is many
    assert versions.ns_selector_supported(b) is many
    assert b.autoscaler_type_label is type_label
    assert (versions.REMOTE_POD_TERMINATED in b.pod_reasons) is terminated
    assert b.pod_reasons[:2] == (versions.OFFLOADING_BACKOFF, versions.OFFLOADING_ABORTED)
    assert b.annotations_added == (versions.V12_ANNOTATIONS if terminated else ())


def test_behaviour_label() -> None:
    assert behaviour("v1.1.0").label == "v1.1.0" and behaviour("v1.1.0").known
    assert behaviour("").label == "unknown" and not behaviour("").known


def test_orphaned_namespacemap_blocks_selection_up_to_v11() -> None:
    old, new = behaviour("v1.1.2"), behaviour("v1.2.0")
    vns, maps = ["milan", "milan", "florence"], ["milan", "florence", "gone"]
    assert versions.selection_blocked(old, vns, maps) == (
        "number of foreign clusters (2) does not match that of NamespaceMaps (3)"
    )
    assert versions.selection_blocked(new, vns, maps) == ""
    assert versions.selection_blocked(old, vns, maps[:2]) == ""
    assert versions.selection_blocked(behaviour(""), vns, maps) == ""
    assert versions.orphaned_maps(vns, maps + ["gone"]) == ["gone"]
    assert versions.orphaned_maps(vns, ["zeta", "alpha", "milan"]) == ["alpha", "zeta"]


def test_offload_commands_per_version() -> None:
    assert versions.offload_commands(behaviour("v1.0.0"), ["a", "b c"], ["--pod-offloading-strategy=Remote"]) == [
        "liqoctl offload namespace a --pod-offloading-strategy=Remote",
        "liqoctl offload namespace 'b c' --pod-offloading-strategy=Remote",
    ]
    assert versions.offload_commands(behaviour("v1.0.1"), ["a", "b"]) == ["liqoctl offload namespace a b"]
    assert versions.offload_commands(behaviour("v1.2.0"), []) == []


# -- resource slices, tenants, quotas --------------------------------------------------------------


def _slice(
    name: str = "milan",
    conditions: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": spec or {"providerClusterID": "milan", "consumerClusterID": "rome"},
        "status": {"conditions": conditions or [], "resources": {"cpu": "4", "memory": "8Gi"}},
    }


ACCEPTED = [
    {"type": "Authentication", "status": "Accepted", "reason": "ResourceSliceAuthenticationAccepted"},
    {"type": "Resources", "status": "Accepted", "reason": "ResourceSliceResourcesAccepted"},
]
DENIED = [
    {"type": "Authentication", "status": "Accepted", "reason": "ResourceSliceAuthenticationAccepted"},
    {
        "type": "Resources",
        "status": "Denied",
        "reason": "ResourceSliceResourcesDenied",
        "message": "ResourceSlice resources denied",
    },
]


def test_read_slice_accepted_consuming() -> None:
    s = tenancy.read_slice(_slice(conditions=ACCEPTED))
    assert (s.name, s.cluster_id, s.action, s.accepted) == ("milan", "milan", "Consuming", True)
    assert (s.authentication, s.resources_status, s.alerts, s.reason, s.cordoned) == (
        "Accepted",
        "Accepted",
        (),
        "",
        False,
    )
    assert s.resources == {"cpu": "4", "memory": "8Gi"}


def test_read_slice_denied_and_without_conditions() -> None:
    s = tenancy.read_slice(_slice(conditions=DENIED))
    assert not s.accepted and s.resources_status == "Denied" and s.authentication == "Accepted"
    assert s.alerts == ("ResourceSlice resources denied",) and s.reason == "ResourceSliceResourcesDenied"
    empty = tenancy.read_slice(_slice())
    assert not empty.accepted and empty.authentication == "" and empty.reason == ""
    assert tenancy.read_slice({}).name == "" and tenancy.read_slice({}).cluster_id == ""


def test_read_slice_providing_is_the_replicated_one() -> None:
    s = tenancy.read_slice(
        _slice(
            labels={"liqo.io/replicated": "True"}, spec={"consumerClusterID": "bologna", "providerClusterID": "rome"}
        )
    )
    assert s.action == "Providing" and s.cluster_id == "bologna"
    labelled = tenancy.read_slice(_slice(labels={"liqo.io/remote-cluster-id": "turin", "liqo.io/replicated": "false"}))
    assert labelled.action == "Consuming" and labelled.cluster_id == "turin"


@pytest.mark.parametrize(
    ("annotations", "cordoned"),
    [
        ({}, False),
        ({"liqo.io/cordon": "true"}, True),
        ({"liqo.io/cordon": ""}, True),  # present and not false
        ({"liqo.io/cordon": "false"}, False),
        ({"liqo.io/cordon": "False"}, False),
        ({"liqo.io/cordon": "0"}, False),
        ({"liqo.io/cordon": "FALSE"}, True),
        ({"liqo.io/cordon-tenant": "true"}, True),
        ({"liqo.io/cordon": "0", "liqo.io/cordon-tenant": "1"}, True),
    ],
)
def test_cordon_annotations_like_the_quota_creator(annotations: dict[str, str], cordoned: bool) -> None:
    assert tenancy.cordoned_by_annotations(annotations) is cordoned
    assert tenancy.read_slice(_slice(annotations=annotations)).cordoned is cordoned


def test_tenant_condition_defaults_to_active() -> None:
    assert tenancy.tenant_condition({}) == "Active"
    assert tenancy.tenant_condition({"spec": {"tenantCondition": "Cordoned"}}) == "Cordoned"


def test_read_quota() -> None:
    q = tenancy.read_quota(
        {
            "metadata": {"name": "u"},
            "spec": {"user": "u", "limitsEnforcement": "Hard", "cordoned": True, "resources": {"cpu": 2}},
        }
    )
    assert q == tenancy.Quota("u", "u", "Hard", True, {"cpu": "2"})
    assert tenancy.read_quota({"spec": {"cordoned": "true"}}).cordoned is False  # only the boolean true
    assert tenancy.read_quota({}) == tenancy.Quota("", "", "", False, {})


def _q(value: Any) -> Decimal:
    text = str(value or "0")
    return Decimal(text[:-1]) / 1000 if text.endswith("m") else Decimal(text)


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": list(containers)}}


def _container(
    name: str = "app", requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}


FREE = {"cpu": Decimal(2), "memory": Decimal(1000)}


def test_shadow_pod_webhook_cordoned_first() -> None:
    q = tenancy.Quota("u", "u", "None", True, {})
    assert tenancy.shadow_pod_denial(q, FREE, _pod(), _q) == "user is cordoned"


def test_shadow_pod_webhook_hard_needs_limits_equal_to_requests() -> None:
    q = tenancy.Quota("u", "u", "Hard", False, {})
    ok = _container(requests={"cpu": "1", "memory": "10"}, limits={"cpu": "1000m", "memory": "10"})
    assert tenancy.shadow_pod_denial(q, FREE, _pod(ok), _q) == ""
    bad = _container("web", requests={"cpu": "1", "memory": "10"}, limits={"cpu": "2", "memory": "10"})
    assert (
        tenancy.shadow_pod_denial(q, FREE, _pod(bad), _q) == "cpu limits and requests are not equal for container web"
    )


def test_shadow_pod_webhook_requests_needed_unless_none() -> None:
    only_cpu = _container("c1", requests={"cpu": "1"})
    for enforcement in ("Soft", "Hard", ""):
        q = tenancy.Quota("u", "u", enforcement, False, {})
        limits = {"cpu": "1"} if enforcement == "Hard" else {}
        assert tenancy.shadow_pod_denial(q, FREE, _pod(_container("c1", {"cpu": "1"}, limits)), _q) == (
            "CPU and/or memory requests not set for container c1"
        )
    none = tenancy.Quota("u", "u", "None", False, {})
    assert tenancy.shadow_pod_denial(none, FREE, _pod(only_cpu), _q) == ""
    only_memory = _container("c2", requests={"memory": "1"})
    assert tenancy.shadow_pod_denial(tenancy.Quota("u", "u", "Soft", False, {}), FREE, _pod(only_memory), _q) == (
        "CPU and/or memory requests not set for container c2"
    )


def test_shadow_pod_webhook_quota_usage() -> None:
    q = tenancy.Quota("u", "u", "Soft", False, {})
    two = _pod(_container("a", {"cpu": "1", "memory": "400"}), _container("b", {"cpu": "1500m", "memory": "400"}))
    assert tenancy.shadow_pod_denial(q, FREE, two, _q) == "peering cpu quota usage exceeded - free 2 / requested 2.5"
    fits = _pod(_container("a", {"cpu": "1", "memory": "600"}), _container("b", {"cpu": "1", "memory": "400"}))
    assert tenancy.shadow_pod_denial(q, FREE, fits, _q) == ""  # exactly the free quota
    gpu = _pod(_container("a", {"cpu": "1", "memory": "1", "nvidia.com/gpu": "1"}))
    assert tenancy.shadow_pod_denial(q, FREE, gpu, _q) == "nvidia.com/gpu quota limit not found for this peering"
    assert tenancy.shadow_pod_denial(q, FREE, {}, _q) == ""


def test_refusal_of_failed_reflection_messages() -> None:
    prefix = 'Error reflecting object to cluster "milan": admission webhook "shadowpod.validate.liqo.io" denied the request: '
    assert tenancy.refusal_of(prefix + "user is cordoned") == "cordoned"
    assert tenancy.refusal_of(prefix + "peering cpu quota usage exceeded - free 0 / requested 1") == "quota"
    assert tenancy.refusal_of(prefix + "memory quota limit not found for this peering") == "quota"
    assert tenancy.refusal_of(prefix + "missing creator label") == ""


def test_admission_of_a_provider() -> None:
    accepted = tenancy.read_slice(_slice(conditions=ACCEPTED))
    denied = tenancy.read_slice(_slice("milan-2", conditions=DENIED))
    assert tenancy.admission("milan", [accepted]) == tenancy.Admission(False, ())
    assert tenancy.admission("milan", []) == tenancy.Admission(False, ())
    one_denied = tenancy.admission("milan", [accepted, denied])
    assert not one_denied.refuses  # another slice still grants resources
    all_denied = tenancy.admission("milan", [denied])
    assert all_denied.refuses and all_denied.reasons == (
        "milan denied the resources of slice milan-2: ResourceSliceResourcesDenied",
    )
    other = tenancy.admission("florence", [denied])
    assert not other.refuses
    providing = tenancy.read_slice(
        _slice(conditions=DENIED, labels={"liqo.io/replicated": "true"}, spec={"consumerClusterID": "milan"})
    )
    assert not tenancy.admission("milan", [providing]).refuses
    auth_denied = tenancy.read_slice(_slice(conditions=[{"type": "Authentication", "status": "Denied"}]))
    assert tenancy.admission("milan", [auth_denied]).reasons == ("milan denied the resources of slice milan: Denied",)


def test_admission_from_refusals() -> None:
    cordoned = tenancy.admission("milan", [], {"cordoned": 1})
    assert cordoned.refuses
    assert cordoned.reasons == (
        "milan has cordoned this cluster's tenant: new pods are refused (\u201cuser is cordoned\u201d on 1 pod)",
    )
    assert "on 3 pods" in tenancy.admission("milan", [], {"cordoned": 3}).reasons[0]
    quota = tenancy.admission("milan", [], {"quota": 2, "cordoned": 0})
    assert not quota.refuses  # smaller pods still fit
    assert quota.reasons == ("milan refused 2 pods over this cluster's quota there (\u201cquota usage exceeded\u201d)",)
    assert tenancy.admission("milan", [], {"quota": 1}).reasons[0].startswith("milan refused 1 pod over")


def test_tenant_refuses() -> None:
    q = tenancy.Quota("u", "u", "Hard", True, {})
    free = tenancy.Quota("u", "u", "Hard", False, {})
    assert tenancy.tenant_refuses("Drained", None).startswith("drained")
    assert tenancy.tenant_refuses("Cordoned", None).startswith("cordoned")
    assert tenancy.tenant_refuses("Active", q).startswith("cordoned")
    assert tenancy.tenant_refuses("Active", free) == ""
    assert tenancy.tenant_refuses("Active", None) == ""


# -- stuck pods and DaemonSets ----------------------------------------------------------------------


def _facts(**kw: Any) -> PodFacts:
    base: dict[str, Any] = {"name": "web-1", "phase": "Pending", "reason": "", "cluster_id": ""}
    return PodFacts(**{**base, **kw})


def test_backoff_namespace_not_offloaded() -> None:
    found = classify(_facts(reason="OffloadingBackOff", cluster_id="milan"), "shop", offloaded=False, labelled=False)
    assert found is not None and found.kind == "backoff"
    assert found.explanation == (
        "Pending on milan: Liqo's virtual kubelet rejected it (ReflectionDisabled): the namespace is not offloaded at all"
    )
    assert found.fix.startswith("offload shop (liqoctl offload namespace shop); the pod is offloaded")


def test_backoff_namespace_offloaded_elsewhere() -> None:
    found = classify(_facts(reason="OffloadingBackOff", cluster_id="milan"), "shop", offloaded=True, labelled=True)
    assert found is not None and found.explanation.endswith("not offloaded to that cluster")
    assert found.fix.startswith("offload shop to milan (its selector must match it)")
    unbound = classify(_facts(reason="OffloadingBackOff"), "shop", offloaded=True, labelled=True)
    assert unbound is not None and unbound.explanation.startswith("Pending: ") and "to that cluster (" in unbound.fix


def test_aborted_lost_cluster() -> None:
    owned = classify(
        _facts(
            phase="Failed",
            reason="OffloadingAborted",
            cluster_id="naples",
            owner_kind="ReplicaSet",
            owner_name="web-5d",
        ),
        "shop",
        offloaded=True,
        labelled=True,
    )
    assert owned is not None and owned.kind == "aborted"
    assert owned.explanation.startswith("Failed on naples: the namespace lost that cluster")
    assert owned.fix == "delete it: its ReplicaSet web-5d creates a new one"
    bare = classify(_facts(phase="Failed", reason="OffloadingAborted"), "shop", offloaded=True, labelled=True)
    assert bare is not None and bare.fix.startswith("delete and create it again")


def test_remote_pod_terminated() -> None:
    found = classify(_facts(phase="Failed", reason="RemotePodTerminated", cluster_id="milan"), "shop", True, True)
    assert found is not None and found.kind == "terminated" and found.explanation.startswith("ended on milan")


def test_refused_by_the_provider() -> None:
    cordoned = classify(
        _facts(cluster_id="milan", failed_reflection="denied the request: user is cordoned"), "shop", True, True
    )
    assert cordoned is not None and cordoned.kind == "refused"
    assert "this cluster's tenant is cordoned there" in cordoned.explanation
    assert cordoned.fix.startswith("ask the provider to uncordon")
    quota = classify(
        _facts(cluster_id="milan", failed_reflection="peering cpu quota usage exceeded - free 0 / requested 1"),
        "shop",
        True,
        True,
    )
    assert quota is not None and "over the quota there" in quota.explanation and quota.fix.startswith("lower")
    running = classify(
        _facts(phase="Running", cluster_id="milan", failed_reflection="user is cordoned"), "shop", True, True
    )
    assert running is None
    other = classify(_facts(cluster_id="milan", failed_reflection="timeout"), "shop", True, True)
    assert other is None


def test_webhook_missed_the_pod() -> None:
    reason = "Unschedulable: 0/5 nodes are available: 1 node(s) had untolerated taint {virtual-node.liqo.io/not-allowed: true}, 4 node(s) didn't match Pod's node affinity/selector."
    late = classify(_facts(reason=reason), "shop", offloaded=True, labelled=False)
    assert late is not None and late.kind == "webhook-missed"
    assert late.explanation.endswith("(the namespace was offloaded after it)")
    assert late.fix.startswith(
        "label the namespace first (kubectl label namespace shop liqo.io/scheduling-enabled=true), then recreate"
    )
    labelled = classify(_facts(reason=reason), "shop", offloaded=True, labelled=True)
    assert labelled is not None and labelled.fix.startswith("recreate the pod")
    never = classify(_facts(reason=reason), "shop", offloaded=False, labelled=False)
    assert never is not None and never.explanation.endswith("(the namespace is not offloaded)")
    assert never.fix.startswith("offload shop, label the namespace first")
    assert classify(_facts(phase="Running", reason=reason), "shop", True, True) is None
    assert classify(_facts(reason="Unschedulable: Insufficient cpu"), "shop", True, True) is None


def test_daemonset_on_a_virtual_node() -> None:
    found = classify(
        _facts(phase="Running", cluster_id="milan", owner_kind="DaemonSet", owner_name="node-exporter"),
        "mon",
        True,
        True,
    )
    assert found is not None and found.kind == "daemonset"
    assert "DaemonSet node-exporter" in found.explanation and "milan" in found.explanation
    assert found.fix == "keep the DaemonSet local: " + stuckpods.daemonset_patch_command("mon", "node-exporter")
    local = classify(_facts(phase="Running", owner_kind="DaemonSet", owner_name="x"), "mon", True, True)
    assert local is None
    backoff = classify(
        _facts(reason="OffloadingBackOff", cluster_id="milan", owner_kind="DaemonSet", owner_name="ds"),
        "mon",
        False,
        False,
    )
    assert backoff is not None and backoff.kind == "daemonset"


def test_daemonset_patch() -> None:
    command = stuckpods.daemonset_patch_command("mon", "node-exporter")
    assert command.startswith("kubectl -n mon patch daemonset node-exporter --type merge -p '")
    patch = json.loads(command.split(" -p '", 1)[1].rstrip("'"))
    term = patch["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "liqo.io/type", "operator": "NotIn", "values": ["virtual-node"]}]}
        ]
    }
    assert " " not in command.split(" -p '", 1)[1]


def test_not_stuck() -> None:
    assert classify(_facts(phase="Running", cluster_id="milan"), "shop", True, True) is None
    assert stuckpods.offload_hint("a") == "liqoctl offload namespace a"


TAINT = (
    "Unschedulable: 0/2 nodes are available: 1 node(s) had untolerated taint {virtual-node.liqo.io/not-allowed: true}."
)


@pytest.mark.parametrize(
    ("facts", "offloaded", "explanation", "fix"),
    [
        (
            {"phase": "Running", "cluster_id": "milan", "owner_kind": "DaemonSet", "owner_name": "ds"},
            True,
            "a pod of DaemonSet ds was placed on the virtual node of milan: a DaemonSet runs a pod on every node, "
            "virtual nodes included (liqotech/liqo#1398)",
            "keep the DaemonSet local: " + stuckpods.daemonset_patch_command("shop", "ds"),
        ),
        (
            {"phase": "Failed", "reason": "OffloadingAborted", "cluster_id": "milan"},
            True,
            "Failed on milan: the namespace lost that cluster while the pod ran there (OffloadingAborted); "
            "Liqo never offloads it again",
            "delete and create it again (a bare pod has no controller to recreate it)",
        ),
        (
            {"phase": "Failed", "reason": "RemotePodTerminated", "cluster_id": "milan"},
            True,
            "ended on milan: its remote pod completed but the final status was not reflected (RemotePodTerminated)",
            "nothing to fix; delete it when its logs are no longer needed",
        ),
        (
            {"cluster_id": "milan", "failed_reflection": "user is cordoned"},
            True,
            "Pending on milan: the provider refused it, this cluster's tenant is cordoned there (user is cordoned)",
            "ask the provider to uncordon the tenant (liqoctl uncordon tenant)",
        ),
        (
            {"cluster_id": "milan", "failed_reflection": "quota usage exceeded"},
            True,
            "Pending on milan: the provider refused it, it is over the quota there (quota usage exceeded)",
            "lower the pod's requests, free room in the quota, or ask the provider for a larger ResourceSlice",
        ),
        (
            {"reason": TAINT},
            True,
            "Pending: it asks for a virtual node but does not tolerate the virtual-node taint: it was created before "
            "Liqo's pod webhook acted in shop (the namespace was offloaded after it)",
            "recreate the pod: the webhook adds the toleration only at creation "
            "(liqotech/liqo#924: pre-label namespaces that will be offloaded)",
        ),
        (
            {"reason": "OffloadingBackOff", "cluster_id": "milan"},
            True,
            "Pending on milan: Liqo's virtual kubelet rejected it (ReflectionDisabled): the namespace is not offloaded "
            "to that cluster",
            "offload shop to milan (its selector must match it); the pod is offloaded once the namespace is there, "
            "or pin it to local nodes",
        ),
    ],
)
def test_stuck_pod_words(facts: dict[str, Any], offloaded: bool, explanation: str, fix: str) -> None:
    found = classify(_facts(**facts), "shop", offloaded, labelled=True)
    assert found is not None
    assert (found.name, found.explanation, found.fix) == ("web-1", explanation, fix)


def test_slice_conditions_without_status_or_message() -> None:
    s = tenancy.read_slice(_slice(conditions=[{"type": "Authentication"}, {"type": "Resources", "status": "Denied"}]))
    assert (s.authentication, s.resources_status, s.alerts) == ("", "Denied", ("", ""))


def test_quota_numbers_in_plain_digits() -> None:
    q = tenancy.Quota("u", "u", "None", False, {})
    pod = _pod(_container("a", {"cpu": "200"}))
    assert tenancy.shadow_pod_denial(q, {"cpu": Decimal(100)}, pod, _q) == (
        "peering cpu quota usage exceeded - free 100 / requested 200"
    )


def test_offload_command_flags() -> None:
    assert versions.offload_commands(behaviour("v1.2.0"), ["a"], ["--x", "--y"]) == [
        "liqoctl offload namespace a --x --y"
    ]
