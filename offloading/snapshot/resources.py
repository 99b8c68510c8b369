"""Issue 27 on the pages: a peer's resource slices, tenant and quota with whether it takes new pods, the
installed Liqo version, and the stuck pods / DaemonSets of a namespace, all from the snapshot
(``LiqoResource``, ``Pod``, ``KubeEvent``); the rules are liqo_rules.{tenancy,stuckpods,versions}. The
diagnosis findings made of them are offloading.insight.resourcerules."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from liqo_rules import constants as c
from liqo_rules import stuckpods, tenancy, versions
from offloading.models import Namespace
from offloading.models.fleet import ManagedRef
from offloading.models.inventory import KubeEvent, LiqoResource, Pod


def installed_version(managed: ManagedRef = None) -> versions.Behaviour:
    row = LiqoResource.objects.of(managed).filter(kind="deployments").order_by("namespace", "name").first()
    return versions.behaviour(str((row.data if row else {}).get("version") or ""))


def _slices(cluster_ids: list[str] | None = None, managed: ManagedRef = None) -> list[tenancy.Slice]:
    rows = LiqoResource.objects.of(managed).filter(kind="resourceslices")
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    return [tenancy.read_slice({"metadata": {"name": r.name, **r.data}, **r.data}) for r in rows]


def refusals(cluster_ids: list[str] | None = None, managed: ManagedRef = None) -> dict[str, dict[str, int]]:
    """Per cluster, how many pods its ShadowPod webhook refused, by kind (cordoned / quota), from the
    FailedReflection Warnings on pods bound to its virtual nodes."""
    pods = Pod.objects.of(managed).exclude(cluster_id="")
    if cluster_ids is not None:
        pods = pods.filter(cluster_id__in=cluster_ids)
    where = {(ns, name): cluster for ns, name, cluster in pods.values_list("namespace", "name", "cluster_id")}
    seen: dict[str, dict[str, set[tuple[str, str]]]] = {}
    events = KubeEvent.objects.of(managed).filter(involved_kind="Pod", reason=tenancy.FAILED_REFLECTION)
    for ns, name, message in events.values_list("namespace", "involved_name", "message"):
        kind, cluster = tenancy.refusal_of(message), where.get((ns, name))
        if kind and cluster:
            seen.setdefault(cluster, {}).setdefault(kind, set()).add((ns, name))
    return {cluster: {kind: len(p) for kind, p in kinds.items()} for cluster, kinds in seen.items()}


def admissions(cluster_ids: list[str], managed: ManagedRef = None) -> dict[str, tenancy.Admission]:
    """Whether each cluster takes new pods from ``managed`` (None: the default cluster; a constant number
    of queries)."""
    slices, refused = _slices(cluster_ids, managed), refusals(cluster_ids, managed)
    return {cid: tenancy.admission(cid, slices, refused.get(cid)) for cid in cluster_ids}


@dataclass
class PeerResources:
    admission: tenancy.Admission
    consuming: list[tenancy.Slice] = field(default_factory=list)
    providing: list[tenancy.Slice] = field(default_factory=list)
    tenant_condition: str = ""
    quota: tenancy.Quota | None = None
    tenant_refuses: str = ""


def peer_resources(cluster_id: str, managed: ManagedRef = None) -> PeerResources:
    slices = _slices([cluster_id], managed)
    info = PeerResources(admissions([cluster_id], managed)[cluster_id])
    info.consuming = [s for s in slices if s.action == tenancy.CONSUMING]
    info.providing = [s for s in slices if s.action == tenancy.PROVIDING]
    tenant = LiqoResource.objects.of(managed).filter(kind="tenants", cluster_id=cluster_id).first()
    quota = LiqoResource.objects.of(managed).filter(kind="quotas", cluster_id=cluster_id).first()
    if quota is not None:
        info.quota = tenancy.read_quota({"metadata": {"name": quota.name}, **quota.data})
    if tenant is not None:
        info.tenant_condition = tenancy.tenant_condition(tenant.data)
    if tenant is not None or quota is not None:
        info.tenant_refuses = tenancy.tenant_refuses(info.tenant_condition or tenancy.TENANT_ACTIVE, info.quota)
    return info


def stuck_pods(namespace: Namespace) -> list[stuckpods.StuckPod]:
    """The namespace's pods Liqo leaves stuck and DaemonSet pods on virtual nodes, with their fix."""
    failed: dict[str, str] = {}
    managed = namespace.managed_id
    for name, message in (
        KubeEvent.objects.of(managed)
        .filter(namespace=namespace.name, involved_kind="Pod", reason=tenancy.FAILED_REFLECTION)
        .order_by("last_time")
        .values_list("involved_name", "message")
    ):
        failed[name] = message
    labelled = (namespace.labels or {}).get(c.SCHEDULING_LABEL) == "true"
    found = []
    for pod in Pod.objects.of(managed).filter(namespace=namespace.name).order_by("name"):
        facts = stuckpods.PodFacts(
            pod.name, pod.phase, pod.reason, pod.cluster_id, pod.owner_kind, pod.owner_name, failed.get(pod.name, "")
        )
        stuck = stuckpods.classify(facts, namespace.name, bool(namespace.offloaded), labelled)
        if stuck is not None:
            found.append(stuck)
    return found


def stuck_summary(found: list[stuckpods.StuckPod]) -> list[tuple[str, int]]:
    return sorted(Counter(s.kind for s in found).items())


def api_cluster(cluster_id: str, managed: ManagedRef = None) -> dict[str, Any]:
    """The peer's resources for the API (camelCase)."""
    info = peer_resources(cluster_id, managed)

    def slice_json(s: tenancy.Slice) -> dict[str, Any]:
        return {
            "name": s.name,
            "action": s.action,
            "accepted": s.accepted,
            "authentication": s.authentication,
            "resources": s.resources_status,
            "reason": s.reason,
            "alerts": list(s.alerts),
            "cordoned": s.cordoned,
            "granted": s.resources,
        }

    return {
        "takesNewPods": not info.admission.refuses,
        "refusalReasons": list(info.admission.reasons),
        "resourceSlices": [slice_json(s) for s in info.consuming + info.providing],
        "tenantCondition": info.tenant_condition,
        "quota": None
        if info.quota is None
        else {
            "limitsEnforcement": info.quota.enforcement,
            "cordoned": info.quota.cordoned,
            "resources": info.quota.resources,
        },
        "tenantRefuses": info.tenant_refuses,
    }
