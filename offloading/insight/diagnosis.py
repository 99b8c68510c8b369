"""Stuck-state diagnosis: rules over the snapshot, each with a plain explanation and the action that
fixes it. Shown on the namespace page and counted on the overview.

Rules: the selector matches no cluster; the phase is not Ready after DIAGNOSIS_STUCK_MINUTES (a
setting; with the per-cluster reasons); a remote namespace cannot be created on a peer (CreationLoopBackOff: often the name is taken
there); Terminating for longer than that; a selected peer's offloading module is unhealthy;
Liqo has not reconciled the newest spec (observedGeneration behind); the scheduling label is missing
while the pod strategy needs it; pods pending because no selected virtual node has room. Before any
of it is stuck, a selected cluster in Creating says what Liqo is doing there and what to check.
Issue 27 (liqo_rules.mapping): NamespaceMaps that disagree with the selector (errors Liqo's
controller swallows), the likely causes of a CreationLoopBackOff, another namespace sharing the remote
namespace, a stale Ready condition and a renamed Liqo RuntimeClass (the last two as notes).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.text import capfirst

from liqo_rules import constants as liqo
from liqo_rules import mapping
from liqo_rules import peers as liqo_peers
from liqo_rules.peers import MODULE_HEALTHY
from liqo_rules.webhook import runtime_class_notes
from offloading.insight.findings import Finding
from offloading.insight.resourcerules import diagnose_resources  # refusing peers, stuck pods (issue 27)
from offloading.models import ChangeRequest, Cluster, Namespace, StatusTransition, VirtualNode
from offloading.models.inventory import Pod
from offloading.models.mapping import MappingEntry, PeerNamespaceMap
from offloading.snapshot.refresh import local_cluster_id
from offloading.whatif.collisions import collisions
from offloading.whatif.preview import preview

_INSUFFICIENT = re.compile(r"Insufficient [\w./-]+")


def stuck_minutes() -> float:
    """After how many minutes a phase that is not Ready (or Terminating) counts as stuck (a setting)."""
    return float(settings.LIQO_DASH["DIAGNOSIS_STUCK_MINUTES"])


def _minutes(value: float) -> str:
    return f"{value:g} minute{'' if value == 1 else 's'}"


def _phase_since(namespace: Namespace) -> Any:
    last = (
        StatusTransition.objects.of(namespace.managed_id)
        .filter(namespace=namespace.name, cluster_id="")
        .order_by("-time")
        .first()
    )
    return last.time if last else namespace.refreshed_at


def _no_cluster(namespace: Namespace) -> Finding | None:
    selector = (namespace.offloading_spec or {}).get("clusterSelector") or {}
    if namespace.offloading_phase != "NoClusterSelected" or not selector.get("nodeSelectorTerms"):
        return None
    rows = [r for r in preview(namespace, namespace.offloading_spec or {}).clusters if not r["selected"]]
    closest = ""
    for row in rows:
        for _vn, why in row.get("explanations") or []:
            terms = why.get("terms") or []
            if terms:
                closest = f" The closest is {row['cluster_id']}: {terms[0].get('failed') or terms[0].get('invalid')}."
                break
        if closest:
            break
    return Finding(
        "no-cluster",
        "The cluster selector matches no peered cluster",
        "Liqo offloads nothing until a virtual node's labels satisfy one of the selector's lines." + closest,
        "Edit the offloading: loosen the selector, or label the peer's virtual node.",
    )


def _not_ready(namespace: Namespace, now: Any) -> Finding | None:
    if namespace.offloading_phase in ("Ready", "NoClusterSelected", "Terminating", ""):
        return None
    since = _phase_since(namespace)
    if since is None or now - since < timedelta(minutes=stuck_minutes()):
        return None
    reasons = [
        f"{row.cluster_id}: {row.state}{' – ' + row.message if row.message else ''}"
        for row in namespace.cluster_states.filter(selected=True).exclude(state=liqo.REASON_NAMESPACE_CREATED)
    ]
    return Finding(
        "not-ready",
        f"{namespace.offloading_phase} for more than {_minutes(stuck_minutes())}",
        "Not every selected cluster has its remote namespace. "
        + ("; ".join(reasons) or "No per-cluster reason reported."),
        "Open the clusters named above; fix the peer or deselect it in the cluster selector.",
        "bad",
    )


# What a cluster in Creating means, from the first second (the not-ready rule waits for the stuck time).
CREATING_DOING = (
    "Liqo is creating the twin namespace there: the offloading controller on this cluster asks the peer, "
    "through the peering, to create the remote namespace, and reports NamespaceCreated once it exists."
)
CREATING_CHECK = (
    "It usually takes seconds. If it lasts, check on the peer's page that its offloading module and "
    "virtual node are healthy and that networking and authentication are Healthy; a namespace of the same "
    "name that already exists on the peer turns this into CreationLoopBackOff."
)


def creating_hint(state: str) -> str:
    """What Liqo is doing and what to check, for a cluster whose state is ``Creating`` (else "")."""
    return f"{CREATING_DOING} {CREATING_CHECK}" if state == liqo.REASON_CREATING else ""


def _creating(namespace: Namespace) -> Finding | None:
    creating = list(
        namespace.cluster_states.filter(selected=True, state=liqo.REASON_CREATING)
        .order_by("cluster_id")
        .values_list("cluster_id", flat=True)
    )
    if not creating:
        return None
    shown = ", ".join(creating[:5]) + (f" and {len(creating) - 5} more" if len(creating) > 5 else "")
    return Finding(
        "creating",
        f"Creating the remote namespace on {shown}",
        CREATING_DOING,
        CREATING_CHECK + f" After {_minutes(stuck_minutes())} this is reported as stuck, with each cluster's reason.",
        "info",
    )


def _loop_backoff(namespace: Namespace) -> Finding | None:
    stuck = list(
        namespace.cluster_states.filter(state=liqo.REASON_CREATION_LOOP_BACKOFF).values_list("cluster_id", flat=True)
    )
    if not stuck:
        return None
    strategy = (namespace.offloading_spec or {}).get("namespaceMappingStrategy") or liqo.DEFAULT_NAME
    causes = mapping.backoff_causes(namespace.remote_namespace_name, strategy)
    invalid = causes[0].code == mapping.CAUSE_INVALID_NAME
    return Finding(
        "creation-loop-backoff",
        f"The remote namespace cannot be created on {', '.join(stuck)}",
        f'Liqo keeps failing to create "{namespace.remote_namespace_name}" there (CreationLoopBackOff). Liqo reports '
        "no reason (only the peer's logs have it); likely: " + "; ".join(cause.text for cause in causes) + ".",
        "Offload again with a valid remote name of at most 63 characters (SelectedName)."
        if invalid
        else "Remove or rename the namespace on the peer, or offload again with another mapping (SelectedName).",
        "bad",
    )


def _shared_remote(namespace: Namespace) -> Finding | None:
    """Other local namespaces mapped to the same remote name on a peer: Liqo accepts both (issue 27)."""
    if not namespace.remote_namespace_name or namespace.offloading_deleting:
        return None
    mine = set(namespace.cluster_states.filter(selected=True).values_list("cluster_id", flat=True))
    found = (
        collisions(
            namespace.name,
            namespace.offloading_spec or {},
            local_cluster_id(namespace.managed_id),
            mine,
            namespace.managed_id,
        )
        if mine
        else []
    )
    if not found:
        return None
    peers = sorted({cluster for hit in found for cluster in hit.clusters})
    return Finding(
        "shared-remote-namespace",
        f'Another namespace uses the remote namespace "{namespace.remote_namespace_name}" on {", ".join(peers)}',
        mapping.shared_remote_note([hit.other for hit in found], namespace.remote_namespace_name)
        + " (the peer's NamespaceMap controller finds the namespace already managed by this cluster's "
        "NamespaceMap: no CreationLoopBackOff, no warning).",
        "Give one of them another remote name (SelectedName) before unoffloading or narrowing either.",
        "bad",
    )


def _stale_ready(namespace: Namespace) -> Finding | None:
    """Not-selected clusters whose Ready condition Liqo left behind (the table says NotSelected)."""
    rows = dict(
        namespace.cluster_states.filter(selected=False, state="NotSelected").values_list("cluster_id", "message")
    )
    if not rows:
        return None
    still = set(
        MappingEntry.objects.of(namespace.managed_id)
        .filter(namespace=namespace.name, cluster_id__in=list(rows))
        .exclude(current_phase="")
        .values_list("cluster_id", flat=True)
    )
    stale = sorted(set(rows) - still)
    if not stale:
        return None
    return Finding(
        "stale-condition",
        f"Liqo's per-cluster status of {', '.join(stale)} is stale",
        "No longer selected, but Liqo's status still carries a Ready condition from when "
        f"{'it was' if len(stale) == 1 else 'they were'} (Liqo's controller adds or updates Ready and never "
        "removes it): read OffloadingRequired=False first. Nothing is offloaded there.",
        "Nothing to fix; kubectl and other tools will show the old Ready condition too.",
        "info",
    )


def _gap_since(namespace: Namespace, cluster_id: str) -> Any:
    """When the cluster's OffloadingRequired condition last moved, or the latest change applied, if later."""
    conditions = ((namespace.offloading_status or {}).get("remoteNamespacesConditions") or {}).get(cluster_id) or []
    times = [
        parse_datetime(cond.get("lastTransitionTime") or "")
        for cond in conditions
        if isinstance(cond, dict) and cond.get("type") == liqo.CONDITION_OFFLOADING_REQUIRED
    ]
    applied = (
        ChangeRequest.objects.filter(namespace=namespace.name, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    known = [t for t in [*times, applied] if t is not None]
    return max(known) if known else None


def _controller_gaps(namespace: Namespace) -> Finding | None:
    """Errors Liqo's controller swallows, seen as NamespaceMaps that disagree with the selector (issue 27)."""
    managed = namespace.managed_id
    if namespace.status_is_stale or not PeerNamespaceMap.objects.of(managed).exists():
        return None  # Liqo has not reconciled the newest spec yet, or the maps are not known
    nodes = VirtualNode.objects.of(managed).order_by("namespace", "name").values_list("cluster_id", "name", "labels")
    selection = liqo_peers.select_clusters(
        (namespace.offloading_spec or {}).get("clusterSelector"),
        [(cid, name, labels or {}) for cid, name, labels in nodes],
        terms=False,
    )
    desired = MappingEntry.objects.of(managed).filter(namespace=namespace.name).exclude(desired="")
    gaps = mapping.controller_gaps(
        selection,
        desired.values_list("cluster_id", flat=True),
        PeerNamespaceMap.objects.of(managed).values_list("cluster_id", flat=True),
        deleting=namespace.offloading_deleting,
    )
    if not gaps:
        return None
    parts = []
    for gap in gaps:
        since = _gap_since(namespace, gap.cluster_id)
        parts.append(gap.text(namespace.name) + (f" (since {naturaltime(since)})" if since else ""))
    clusters = ", ".join(gap.cluster_id for gap in gaps)
    return Finding(
        "controller-stuck",
        f"Liqo has not taken up {clusters}",
        capfirst("; ".join(parts)) + ". " + mapping.SWALLOWED_ERRORS,
        "Check the logs of liqo-controller-manager for the NamespaceOffloading of this namespace (a NamespaceMap "
        "patch refused, a missing NamespaceMap); a new change of the offloading makes Liqo try again.",
        "bad",
    )


def _runtime_class(namespace: Namespace) -> Finding | None:
    strategy = (namespace.offloading_spec or {}).get("podOffloadingStrategy") or liqo.LOCAL_AND_REMOTE
    notes = runtime_class_notes(str(settings.LIQO_DASH["RUNTIME_CLASS"]), {})
    if not notes or strategy == liqo.LOCAL:
        return None
    return Finding(
        "runtime-class",
        f'Liqo\'s RuntimeClass is renamed to "{settings.LIQO_DASH["RUNTIME_CLASS"]}"',
        notes[0],
        "Create that RuntimeClass on every peer, or keep the name liqo (Helm offloading.runtimeClass.name).",
        "info",
    )


def _terminating(namespace: Namespace, now: Any) -> Finding | None:
    if not namespace.offloading_deleting:
        return None
    since = _phase_since(namespace)
    if since is None or now - since < timedelta(minutes=stuck_minutes()):
        return None
    holding = list(namespace.cluster_states.exclude(state="").values_list("cluster_id", flat=True))
    return Finding(
        "terminating",
        f"Terminating for more than {_minutes(stuck_minutes())}",
        "Liqo removes the offloading only once every remote namespace is gone"
        + (f"; still held on {', '.join(holding)}." if holding else "."),
        "Check that those peers are reachable; their remote namespaces must be deleted for the finalizer to go.",
    )


def _unhealthy_peers(namespace: Namespace) -> Finding | None:
    selected = set(namespace.cluster_states.filter(selected=True).values_list("cluster_id", flat=True))
    bad = [
        c.cluster_id
        for c in Cluster.objects.of(namespace.managed_id).filter(cluster_id__in=selected)
        if c.offloading_status not in (MODULE_HEALTHY, "")
    ]
    if not bad:
        return None
    return Finding(
        "peer-unhealthy",
        f"The offloading module of {', '.join(bad)} is unhealthy",
        "Liqo cannot create or update the remote namespace on a peer whose offloading module is down.",
        "Open the peer's page for its module conditions; fix the peering or deselect the peer.",
        "bad",
    )


def _stale_generation(namespace: Namespace) -> Finding | None:
    if not namespace.status_is_stale:
        return None
    return Finding(
        "generation-stale",
        "Liqo has not reconciled the newest spec",
        f"observedGeneration is {namespace.offloading_observed_generation}, the spec is at generation "
        f"{namespace.offloading_generation}: the status shown is the previous spec's.",
        "Wait a little; if it stays, check that Liqo's controller manager is running.",
    )


def _missing_label(namespace: Namespace) -> Finding | None:
    strategy = (namespace.offloading_spec or {}).get("podOffloadingStrategy") or liqo.LOCAL_AND_REMOTE
    if namespace.offloading_deleting or strategy not in (liqo.LOCAL_AND_REMOTE, liqo.REMOTE):
        return None
    if (namespace.labels or {}).get(liqo.SCHEDULING_LABEL) == "true":
        return None
    return Finding(
        "scheduling-label",
        f"The namespace lacks {liqo.SCHEDULING_LABEL}=true",
        "Without it Liqo's pod webhook ignores the namespace: its pods are never sent to virtual nodes.",
        f"Liqo adds the label itself; if it is missing, label the namespace: kubectl label ns {namespace.name} "
        f"{liqo.SCHEDULING_LABEL}=true",
    )


def _pods_without_room(namespace: Namespace) -> Finding | None:
    # Only "Insufficient <resource>" is about room: an Unschedulable pod whose affinity or taints no node
    # matches (e.g. pinned to a local node while the strategy is Remote) has another cause.
    pending = Pod.objects.of(namespace.managed_id).filter(
        namespace=namespace.name, phase="Pending", reason__contains="Insufficient"
    )
    starved = {
        name: sorted(set(_INSUFFICIENT.findall(reason))) for name, reason in pending.values_list("name", "reason")[:50]
    }
    if not starved:
        return None
    shown = "; ".join(f"{name}: {', '.join(short)}" for name, short in sorted(starved.items())[:5])
    return Finding(
        "pods-no-room",
        f"{len(starved)} pod{'s' if len(starved) != 1 else ''} pending: no selected node has room",
        "The scheduler found no node (local, or a selected peer's virtual node) with enough free resources ("
        + shown
        + (", ..." if len(starved) > 5 else "")
        + ").",
        "Select more peers, free resources, or lower the pods' requests.",
        "bad",
    )


def diagnose(namespace: Namespace, notes: bool = False) -> list[Finding]:
    """What is stuck in ``namespace``'s offloading, and how to fix it (empty when nothing is); with
    ``notes`` (the namespace page), also what is going on while nothing is stuck yet (severity "info",
    never an alert)."""
    if not namespace.offloaded:
        return []
    now = timezone.now()
    not_ready = _not_ready(namespace, now)
    checks = (
        _no_cluster(namespace),
        not_ready,
        # Until it is stuck: what Liqo is doing on the clusters in Creating, and what to check.
        _creating(namespace) if notes and not_ready is None else None,
        _loop_backoff(namespace),
        _controller_gaps(namespace),
        _shared_remote(namespace),
        _terminating(namespace, now),
        _unhealthy_peers(namespace),
        _stale_generation(namespace),
        _missing_label(namespace),
        _pods_without_room(namespace),
        # What Liqo's status does not say (issue 27): notes for the page only.
        _stale_ready(namespace) if notes else None,
        _runtime_class(namespace) if notes else None,
    )
    return [finding for finding in checks if finding is not None] + diagnose_resources(namespace)
