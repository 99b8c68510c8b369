"""The diagnosis rules of issue 27 over Liqo's resources in the snapshot: selected peers that refuse new pods
(cordoned tenant, denied resource slices), pods Liqo leaves stuck, and an orphaned NamespaceMap that blocks
every selection on Liqo v1.1 and older. What they read is offloading.snapshot.resources."""

from __future__ import annotations

from liqo_rules import constants as c
from liqo_rules import versions
from offloading.insight.findings import Finding
from offloading.models import Namespace, VirtualNode
from offloading.models.fleet import ManagedRef
from offloading.models.mapping import PeerNamespaceMap
from offloading.snapshot.resources import admissions, installed_version, stuck_pods


def orphaned_map_finding(managed: ManagedRef = None) -> Finding | None:
    """Liqo v1.1 and older select no cluster for any namespace while a NamespaceMap has no VirtualNode of
    its cluster (the controller's count check); v1.2 does not (liqo_rules.versions). ``managed``: the managed
    cluster (None: the default one)."""
    release = installed_version(managed)
    vn_clusters = list(VirtualNode.objects.of(managed).values_list("cluster_id", flat=True).distinct())
    maps = list(PeerNamespaceMap.objects.of(managed).values_list("cluster_id", flat=True))
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
    """Diagnosis rules of issue 27 (called once from offloading.insight.diagnosis.diagnose): selected peers that
    refuse new pods (cordoned tenant, denied slices), stuck pods with their fix, and an orphaned
    NamespaceMap blocking selection on Liqo v1.1 and older."""
    findings: list[Finding] = []
    status = namespace.offloading_status or {}
    selected = sorted(
        cluster
        for cluster, conditions in (status.get("remoteNamespacesConditions") or {}).items()
        if any(cd.get("type") == c.CONDITION_OFFLOADING_REQUIRED and cd.get("status") == "True" for cd in conditions)
    )
    refusing = (
        {cid: a for cid, a in admissions(selected, namespace.managed_id).items() if a.refuses} if selected else {}
    )
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
    orphaned = orphaned_map_finding(namespace.managed_id) if namespace.offloaded else None
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
