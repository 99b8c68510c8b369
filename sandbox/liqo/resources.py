"""Resource slices, tenants, quotas, cordons and the Liqo version in the sandbox (issue 27).

A scenario says:

* ``liqoVersion`` (top level, default ``v1.2.0``): the tag of the controller manager's image; the
  Deployment ``liqo-controller-manager`` in ``liqo`` carries it, as a Helm install does.
* per provider peer, how it treats this cluster's tenant there: ``tenantCondition`` (``Cordoned``: Liqo
  on the peer refuses every new pod, ``user is cordoned``; ``Drained``: our resource slice is Denied too)
  and ``quota`` (``{limitsEnforcement: Hard|Soft|None, resources: {cpu: "2"}}``: the ShadowPod webhook's
  checks against it). The refusal reaches this cluster as on a real consumer: the pod is bound to the
  virtual node and stays Pending, with a Warning ``FailedReflection`` Event on it.
* per consumer peer, ``tenant: {condition: Cordoned|Drained|Active, limitsEnforcement, resources}``:
  the Tenant, the Quota and the replicated ResourceSlice this cluster holds for it.

Every provider peer gets the ResourceSlice this cluster asked it for, in ``liqo-tenant-<peer>``, with
its Authentication and Resources conditions.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from liqo_rules import constants as c
from liqo_rules import tenancy
from liqo_rules.peers import PROVIDER_ROLES, tenant_namespace_name
from liqo_rules.versions import CONTROLLER_MANAGER_LABELS, LIQO_NAMESPACE
from sandbox.apicommon import now_iso
from sandbox.apiserver import ApiServer
from sandbox.kinds import DEPLOYMENTS, NAMESPACES, NODES, PODS, QUOTAS, RESOURCE_SLICES, TENANTS
from sandbox.liqo.context import LiqoContext
from sandbox.liqo.scheduling import quantity
from sandbox.objects import Obj, clone

DEFAULT_VERSION = "v1.2.0"
SHADOWPOD_WEBHOOK = "shadowpod.validate.liqo.io"


def apply_version(data: dict[str, Any], server: ApiServer) -> None:
    """The controller manager's Deployment, its image tagged with the scenario's Liqo version."""
    version = str(data.get("liqoVersion") or DEFAULT_VERSION)
    if server.store.get(NAMESPACES, "", LIQO_NAMESPACE) is None:
        server.create(NAMESPACES, "", {"metadata": {"name": LIQO_NAMESPACE}}, manager="helm")
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "liqo-controller-manager",
            "namespace": LIQO_NAMESPACE,
            "labels": dict(CONTROLLER_MANAGER_LABELS),
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(CONTROLLER_MANAGER_LABELS)},
            "template": {
                "metadata": {"labels": dict(CONTROLLER_MANAGER_LABELS)},
                "spec": {
                    "containers": [
                        {"name": "controller-manager", "image": f"ghcr.io/liqotech/liqo-controller-manager:{version}"}
                    ]
                },
            },
        },
    }
    server.create(DEPLOYMENTS, LIQO_NAMESPACE, body, manager="helm")


def _conditions(denied: bool) -> list[dict[str, str]]:
    now = now_iso()
    resources = (
        {"status": "Denied", "reason": "ResourceSliceResourcesDenied", "message": "ResourceSlice resources denied"}
        if denied
        else {
            "status": "Accepted",
            "reason": "ResourceSliceResourcesAccepted",
            "message": "ResourceSlice resources accepted",
        }
    )
    return [
        {
            "type": "Authentication",
            "status": "Accepted",
            "reason": "ResourceSliceAuthenticationAccepted",
            "message": "ResourceSlice authentication accepted",
            "lastTransitionTime": now,
        },
        {"type": "Resources", **resources, "lastTransitionTime": now},
    ]


def _slice(server: ApiServer, namespace: str, name: str, body: dict[str, Any], denied: bool) -> None:
    created = server.create(RESOURCE_SLICES, namespace, body, manager=c.CONTROLLER_MANAGER).obj
    fresh = clone(created)
    fresh["status"] = {"conditions": _conditions(denied), "resources": dict(body["spec"].get("resources") or {})}
    server.update(RESOURCE_SLICES, namespace, name, fresh, manager=c.CONTROLLER_MANAGER, subresource="status")


def apply_peer(peer: dict[str, Any], server: ApiServer, ctx: LiqoContext) -> None:
    """A peer's slices, tenant and quota (after the peer's tenant namespace exists)."""
    cluster_id, local = str(peer["id"]), ctx.local_cluster_id
    namespace = tenant_namespace_name(cluster_id)
    role = str(peer.get("role") or "Provider")
    resources = {
        k: str(v) for k, v in (peer.get("resources") or {"cpu": "16", "memory": "64Gi", "pods": "200"}).items()
    }
    if role in PROVIDER_ROLES:
        condition = str(peer.get("tenantCondition") or tenancy.TENANT_ACTIVE)
        quota = peer.get("quota") or {}
        ctx.provider_policies[cluster_id] = {
            "condition": condition,
            "enforcement": str(quota.get("limitsEnforcement") or tenancy.NONE),
            "resources": {k: str(v) for k, v in (quota.get("resources") or {}).items()},
        }
        body = {
            "apiVersion": "authentication.liqo.io/v1beta1",
            "kind": "ResourceSlice",
            "metadata": {
                "name": cluster_id,
                "namespace": namespace,
                "labels": {
                    c.REMOTE_CLUSTER_ID_LABEL: cluster_id,
                    c.REPLICATION_LABEL: "true",
                    c.REMOTE_ID_LABEL: cluster_id,
                },
            },
            "spec": {
                "consumerClusterID": local,
                "providerClusterID": cluster_id,
                "class": "default",
                "resources": resources,
            },
        }
        _slice(server, namespace, cluster_id, body, condition == tenancy.TENANT_DRAINED)
    tenant = peer.get("tenant")
    if role in ("Consumer", "ConsumerAndProvider") and tenant is not None:
        condition = str(tenant.get("condition") or tenancy.TENANT_ACTIVE)
        cordoned = condition != tenancy.TENANT_ACTIVE
        server.create(
            TENANTS,
            namespace,
            {
                "apiVersion": "authentication.liqo.io/v1beta1",
                "kind": "Tenant",
                "metadata": {
                    "name": cluster_id,
                    "namespace": namespace,
                    "labels": {c.REMOTE_CLUSTER_ID_LABEL: cluster_id},
                },
                "spec": {"clusterID": cluster_id, "tenantCondition": condition},
            },
            manager="liqoctl",
        )
        granted = {k: str(v) for k, v in (tenant.get("resources") or {"cpu": "8", "memory": "16Gi"}).items()}
        annotations = {tenancy.CORDON_TENANT_ANNOTATION: "true"} if cordoned else {}
        body = {
            "apiVersion": "authentication.liqo.io/v1beta1",
            "kind": "ResourceSlice",
            "metadata": {
                "name": f"{cluster_id}-slice",
                "namespace": namespace,
                "labels": {
                    c.REMOTE_CLUSTER_ID_LABEL: cluster_id,
                    tenancy.REPLICATED_LABEL: "true",
                    "liqo.io/originID": cluster_id,
                },
                "annotations": annotations,
            },
            "spec": {
                "consumerClusterID": cluster_id,
                "providerClusterID": local,
                "class": "default",
                "resources": granted,
            },
        }
        _slice(server, namespace, f"{cluster_id}-slice", body, condition == tenancy.TENANT_DRAINED)
        quota_spec: dict[str, Any] = {
            "user": f"liqo-cluster-{cluster_id}",
            "limitsEnforcement": str(tenant.get("limitsEnforcement") or tenancy.NONE),
            "resources": granted,
        }
        if cordoned:
            quota_spec["cordoned"] = True
        server.create(
            QUOTAS,
            namespace,
            {
                "apiVersion": "offloading.liqo.io/v1beta1",
                "kind": "Quota",
                "metadata": {"name": f"liqo-cluster-{cluster_id}", "namespace": namespace},
                "spec": quota_spec,
            },
            manager=c.CONTROLLER_MANAGER,
        )


def refusal(ctx: LiqoContext, cluster_id: str, pod: Obj) -> str:
    """Why the provider ``cluster_id`` refuses this cluster's ``pod`` (its ShadowPod webhook), "" if not."""
    policy = ctx.provider_policies.get(cluster_id)
    if not policy:
        return ""
    cordoned = policy["condition"] != tenancy.TENANT_ACTIVE
    limits = policy["resources"]
    if not cordoned and not limits and policy["enforcement"] == tenancy.NONE:
        return ""
    quota = tenancy.Quota("", "", policy["enforcement"], cordoned, limits)
    free = {key: quantity(value) for key, value in limits.items()} if limits else _unlimited(pod)
    nodes = {
        node["metadata"]["name"]
        for node in ctx.store.items(NODES)
        if (node["metadata"].get("labels") or {}).get(c.REMOTE_CLUSTER_ID_LABEL) == cluster_id
    }
    for other in ctx.store.items(PODS):
        bound = (other.get("spec") or {}).get("nodeName")
        if bound not in nodes or (other.get("status") or {}).get("phase") != "Running":
            continue
        for container in (other.get("spec") or {}).get("containers") or []:
            for key, value in ((container.get("resources") or {}).get("requests") or {}).items():
                if key in free:
                    free[key] -= quantity(value)
    return tenancy.shadow_pod_denial(quota, free, pod, quantity)


def _unlimited(pod: Obj) -> dict[str, Decimal]:
    """No quota resources given: room for whatever the pod asks."""
    big = Decimal(10) ** 30
    keys = {
        key
        for container in (pod.get("spec") or {}).get("containers") or []
        for key in ((container.get("resources") or {}).get("requests") or {})
    }
    return dict.fromkeys(keys, big)


def failed_reflection_message(cluster_id: str, denial: str) -> str:
    """The Warning the virtual kubelet records on the local pod (forge.EventFailedReflectionMsg)."""
    return (
        f'Error reflecting object to cluster "{cluster_id}": admission webhook "{SHADOWPOD_WEBHOOK}" '
        f"denied the request: {denial}"
    )
