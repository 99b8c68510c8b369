"""Issue 27 on the pages: a peer's resource slices, tenant and quota with whether it takes new pods, the
installed Liqo version, and the stuck pods / DaemonSets of a namespace, all from the snapshot
(``LiqoResource``, ``Pod``, ``KubeEvent``); the rules are liqo_rules.{tenancy,stuckpods,versions}."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from liqo_rules import constants as c
from liqo_rules import stuckpods, tenancy, versions
from offloading.models import Namespace, VirtualNode
from offloading.models.inventory import KubeEvent, LiqoResource, Pod
from offloading.models.mapping import PeerNamespaceMap
from offloading.snapshot.findings import Finding


def installed_version() -> versions.Behaviour:
    row = LiqoResource.objects.filter(kind="deployments").order_by("namespace", "name").first()
    return versions.behaviour(str((row.data if row else {}).get("version") or ""))


def _slices(cluster_ids: list[str] | None = None) -> list[tenancy.Slice]:
    rows = LiqoResource.objects.filter(kind="resourceslices")
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    return [tenancy.read_slice({"metadata": {"name": r.name, **r.data}, **r.data}) for r in rows]


def refusals(cluster_ids: list[str] | None = None) -> dict[str, dict[str, int]]:
    """Per cluster, how many pods its ShadowPod webhook refused, by kind (cordoned / quota), from the
    FailedReflection Warnings on pods bound to its virtual nodes."""
    pods = Pod.objects.exclude(cluster_id="")
    if cluster_ids is not None:
        pods = pods.filter(cluster_id__in=cluster_ids)
    where = {(ns, name): cluster for ns, name, cluster in pods.values_list("namespace", "name", "cluster_id")}
    seen: dict[str, dict[str, set[tuple[str, str]]]] = {}
    events = KubeEvent.objects.filter(involved_kind="Pod", reason=tenancy.FAILED_REFLECTION)
    for ns, name, message in events.values_list("namespace", "involved_name", "message"):
        kind, cluster = tenancy.refusal_of(message), where.get((ns, name))
        if kind and cluster:
            seen.setdefault(cluster, {}).setdefault(kind, set()).add((ns, name))
    return {cluster: {kind: len(p) for kind, p in kinds.items()} for cluster, kinds in seen.items()}


def admissions(cluster_ids: list[str]) -> dict[str, tenancy.Admission]:
    """Whether each cluster takes new pods from here (a constant number of queries)."""
    slices, refused = _slices(cluster_ids), refusals(cluster_ids)
    return {cid: tenancy.admission(cid, slices, refused.get(cid)) for cid in cluster_ids}


@dataclass
class PeerResources:
    admission: tenancy.Admission
    consuming: list[tenancy.Slice] = field(default_factory=list)
    providing: list[tenancy.Slice] = field(default_factory=list)
    tenant_condition: str = ""
    quota: tenancy.Quota | None = None
    tenant_refuses: str = ""


def peer_resources(cluster_id: str) -> PeerResources:
    slices = _slices([cluster_id])
    info = PeerResources(admissions([cluster_id])[cluster_id])
    info.consuming = [s for s in slices if s.action == tenancy.CONSUMING]
    info.providing = [s for s in slices if s.action == tenancy.PROVIDING]
    tenant = LiqoResource.objects.filter(kind="tenants", cluster_id=cluster_id).first()
    quota = LiqoResource.objects.filter(kind="quotas", cluster_id=cluster_id).first()
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
    for name, message in (
        KubeEvent.objects.filter(namespace=namespace.name, involved_kind="Pod", reason=tenancy.FAILED_REFLECTION)
        .order_by("last_time")
        .values_list("involved_name", "message")
    ):
        failed[name] = message
    labelled = (namespace.labels or {}).get(c.SCHEDULING_LABEL) == "true"
    found = []
    for pod in Pod.objects.filter(namespace=namespace.name).order_by("name"):
        facts = stuckpods.PodFacts(
            pod.name, pod.phase, pod.reason, pod.cluster_id, pod.owner_kind, pod.owner_name, failed.get(pod.name, "")
        )
        stuck = stuckpods.classify(facts, namespace.name, bool(namespace.offloaded), labelled)
        if stuck is not None:
            found.append(stuck)
    return found


def stuck_summary(found: list[stuckpods.StuckPod]) -> list[tuple[str, int]]:
    return sorted(Counter(s.kind for s in found).items())


def api_cluster(cluster_id: str) -> dict[str, Any]:
    """The peer's resources for the API (camelCase)."""
    info = peer_resources(cluster_id)

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


def orphaned_map_finding() -> Finding | None:
    """Liqo v1.1 and older select no cluster for any namespace while a NamespaceMap has no VirtualNode of
    its cluster (the controller's count check); v1.2 does not (liqo_rules.versions)."""
    release = installed_version()
    vn_clusters = list(VirtualNode.objects.values_list("cluster_id", flat=True).distinct())
    maps = list(PeerNamespaceMap.objects.values_list("cluster_id", flat=True))
    blocked = versions.selection_blocked(release, vn_clusters, maps)
    orphans = versions.orphaned_maps(vn_clusters, maps)
    # Only a map the snapshot holds without its VirtualNode: maps the snapshot has not read (yet) are
    # no evidence that Liqo is blocked.
    if not blocked or not orphans:
        return None
    which = ", ".join(orphans)
    return Finding(
        "orphaned_namespace_map",
        f"Liqo {release.label} selects no cluster: the NamespaceMap of {which} has no VirtualNode",
        f"Liqo's controller up to v1.1 refuses every selection while the peers and the NamespaceMaps differ "
        f"in number ({blocked}); this error reaches only its logs.",
        f"Delete the orphaned NamespaceMap ({which}, in its liqo-tenant-<cluster id> namespace) once the peer "
        "is really gone, or upgrade Liqo to v1.2, which no longer counts them.",
        "bad",
    )


def diagnose_resources(namespace: Namespace) -> list[Finding]:
    """Diagnosis rules of issue 27 (called once from offloading.snapshot.diagnosis.diagnose): selected peers that
    refuse new pods (cordoned tenant, denied slices), stuck pods with their fix, and an orphaned
    NamespaceMap blocking selection on Liqo v1.1 and older."""
    findings: list[Finding] = []
    status = namespace.offloading_status or {}
    selected = sorted(
        cluster
        for cluster, conditions in (status.get("remoteNamespacesConditions") or {}).items()
        if any(cd.get("type") == c.CONDITION_OFFLOADING_REQUIRED and cd.get("status") == "True" for cd in conditions)
    )
    refusing = {cid: a for cid, a in admissions(selected).items() if a.refuses} if selected else {}
    if refusing:
        findings.append(
            Finding(
                "peer_refuses_pods",
                f"{len(refusing)} selected cluster{'' if len(refusing) == 1 else 's'} refuse{'s' if len(refusing) == 1 else ''} new pods",
                " ".join(r for a in refusing.values() for r in a.reasons),
                "Ask the provider to uncordon this cluster's tenant (liqoctl uncordon tenant on the provider) or "
                "to accept a ResourceSlice, or narrow the cluster selector to clusters that take pods.",
                "bad",
            )
        )
    orphaned = orphaned_map_finding() if namespace.offloaded else None
    if orphaned is not None:
        findings.append(orphaned)
    stuck = [s for s in stuck_pods(namespace) if s.kind != "terminated"]
    if stuck:
        first = stuck[0]
        findings.append(
            Finding(
                "stuck_pods",
                f"{len(stuck)} pod{'' if len(stuck) == 1 else 's'} stuck by Liqo",
                f"{first.name}: {first.explanation}" + (f" (and {len(stuck) - 1} more)" if len(stuck) > 1 else ""),
                first.fix,
            )
        )
    return findings
