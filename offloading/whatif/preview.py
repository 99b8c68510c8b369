"""What a change would do, computed from the snapshot (preview), and what the API server says of it (dry-run)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.db.models import TextField
from django.db.models.functions import Cast

from liqo_rules import constants as liqo
from liqo_rules import peers as liqo_peers
from liqo_rules import webhook as liqo_webhook
from liqo_rules.manifest import render_manifest
from liqo_rules.spec import normalize_spec, remote_namespace_name
from offloading.cluster import kube
from offloading.cluster.remote import Readers
from offloading.cluster.twins import RemoteCheck, remote_collisions
from offloading.models import (
    Cluster,
    Namespace,
    VirtualNode,
)
from offloading.snapshot.refresh import local_cluster_id
from offloading.snapshot.resources import admissions
from offloading.whatif.capacity import Room, rooms
from offloading.whatif.collisions import Collision, collisions
from offloading.whatif.pods import PodImpact, pod_impact, running_pods

log = logging.getLogger(__name__)


SAMPLE_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "sample"},
    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]},
}


@dataclass
class Preview:
    """Everything a requester should see before submitting a spec for a namespace; computed from the
    snapshot only (no Kubernetes call)."""

    clusters: list[dict[str, Any]]
    selected: list[str]
    target_count: int
    gains: list[str]
    losses: list[str]
    remote_namespace_name: str
    local_cluster_id: str
    manifest: str
    pod_before: dict[str, Any]
    pod_after: dict[str, Any]
    # The running pods the change hits (lost clusters, a stricter strategy) and the room on the
    # selected clusters (capacity.Room, by cluster id).
    pod_impact: PodImpact = field(default_factory=lambda: PodImpact(followed=False))
    rooms: dict[str, Room] = field(default_factory=dict)
    # Other namespaces already mapping to the same remote name on a selected peer (a new offloading).
    collisions: list[Collision] = field(default_factory=list)
    # The remote name checked on each selected peer that is a managed cluster too, on its own API
    # (offloading.cluster.twins): TAKEN when Liqo would fail there (CreationLoopBackOff), UNCHECKED when
    # the provider could not be asked in time. A new offloading only, and only when the caller asks.
    remote_checks: list[RemoteCheck] = field(default_factory=list)
    # Selected peers that refuse new pods from this cluster (cordoned tenant, denied resource slices), with why.
    refusing: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Liqo's RuntimeClass under another name than liqo (LIQO_DASH_RUNTIME_CLASS): what it does to pods.
    runtime_notes: list[str] = field(default_factory=list)

    @property
    def pod_changed(self) -> bool:
        return self.pod_after != self.pod_before

    @property
    def nearly_full(self) -> list[str]:
        """The selected clusters that are nearly full."""
        return [cluster_id for cluster_id, room in self.rooms.items() if room.nearly_full]


@lru_cache(maxsize=4096)
def labels_of(labels_json: str | None) -> Mapping[str, str]:
    """A virtual node's labels from the JSON text of its ``labels`` column, cached by that text: the live
    preview reads the same labels on every keystroke. Read-only (shared between requests); unreadable
    JSON reads as no labels."""
    try:
        labels = json.loads(labels_json) if labels_json else {}
    except ValueError:
        labels = {}
    return MappingProxyType(labels if isinstance(labels, dict) else {})


def preview(
    namespace: Namespace,
    spec: dict[str, Any],
    pod: dict[str, Any] | None = None,
    *,
    providers: bool = False,
    identity: Readers = None,
) -> Preview:
    """Which clusters ``spec`` selects for ``namespace`` and why the others are excluded, what is gained
    and lost compared with now (with the running pods that hits), the room on the selected clusters,
    the remote name, the manifest liqoctl would print, and how Liqo's webhook would mutate ``pod`` (a
    sample pod by default). A constant number of queries whatever the number of clusters. Each row of
    ``clusters`` also holds ``module_status``: the peer's offloading module status when it is known and
    not Healthy, else "".

    ``providers``: for a new offloading, also ask each selected peer that is a managed cluster whether
    the remote name is free there (``offloading.cluster.twins.remote_collisions``, as ``identity``: the
    requesting user as each provider sees them: its impersonation and groups). The only part that leaves the snapshot: one query for
    the managed clusters, then their APIs at once, waited for at most ``remote.DEADLINE`` s (one that has
    not answered is UNCHECKED, a note); no API is asked when no managed cluster is selected. An
    offloaded namespace is not checked: Liqo's webhook locks its remote name."""
    managed = namespace.managed_id  # None for a namespace the preview built: the default cluster
    nodes = list(
        VirtualNode.objects.of(managed)
        .order_by("namespace", "name")
        .values_list("cluster_id", "name", Cast("labels", TextField()), Cast("capacity", TextField()))
    )
    # The matching only reads the labels: the read-only cached mapping stands in for a dict.
    virtual_nodes: list[tuple[str, str, Any]] = [(cid, name, labels_of(labels)) for cid, name, labels, _ in nodes]
    selection = liqo_peers.select_clusters(spec.get("clusterSelector"), virtual_nodes)
    # Every peer the snapshot knows (those without a virtual node are not in ``selection``), unsorted.
    modules = dict(Cluster.objects.of(managed).order_by().values_list("cluster_id", "offloading_status"))
    rows = []
    for cluster_id in sorted(selection.keys() | modules.keys()):
        entry = selection.get(cluster_id)
        if entry is None:
            entry = {"selected": False, "explanations": [], "disagree": False, "error": None, "reached": False}
            note = "no virtual node: Liqo cannot offload to this cluster"
        elif not entry["reached"]:
            note = "not evaluated: Liqo stopped at an earlier cluster whose selector evaluation failed"
        else:
            note = ""
        # The entry is this call's own (select_clusters builds it): completed in place.
        entry["cluster_id"], entry["note"] = cluster_id, note
        # A Healthy module needs no word in the preview.
        status = modules.get(cluster_id, liqo_peers.MODULE_HEALTHY)
        entry["module_status"] = "" if status == liqo_peers.MODULE_HEALTHY else status
        rows.append(entry)
    selected = [r["cluster_id"] for r in rows if r["selected"]]
    chosen = set(selected)
    refusing = {cid: a.reasons for cid, a in admissions(selected, managed).items() if a.refuses} if selected else {}
    for row in rows:
        row["refuses"] = refusing.get(row["cluster_id"], ())
    capacities: dict[str, list[str | None]] = {}
    for cluster_id, _name, _labels, capacity in nodes:
        if cluster_id in chosen:
            capacities.setdefault(cluster_id, []).append(capacity)
    before = set()
    if namespace.offloaded:
        before = set(namespace.cluster_states.filter(selected=True).values_list("cluster_id", flat=True))
    local_id = local_cluster_id(managed)
    sample = pod or SAMPLE_POD
    losses = sorted(before - chosen) if namespace.offloaded else []
    impact = PodImpact(followed=False)
    if namespace.offloaded:
        running = running_pods([namespace.name], managed).get(namespace.name, {})
        impact = pod_impact(running, losses, namespace.offloading_spec, spec)
    return Preview(
        clusters=rows,
        selected=selected,
        target_count=len(selection),
        gains=sorted(chosen - before) if namespace.offloaded else [],
        losses=losses,
        remote_namespace_name=remote_namespace_name(namespace.name, local_id or "<local-cluster-id>", spec),
        local_cluster_id=local_id,
        manifest=render_manifest(namespace.name, spec, "yaml"),
        pod_before=sample,
        pod_after=liqo_webhook.mutate_pod(spec, sample, settings.LIQO_DASH["RUNTIME_CLASS"]),
        runtime_notes=liqo_webhook.runtime_class_notes(settings.LIQO_DASH["RUNTIME_CLASS"], sample),
        pod_impact=impact,
        rooms=rooms(selected, capacities, managed) if selected else {},
        refusing=refusing,
        collisions=[]
        if namespace.offloaded or not selected
        else collisions(namespace.name, spec, local_id, selected, managed),
        remote_checks=remote_collisions(
            namespace.name, spec, selected, local_id=local_id, identity=identity, own=managed
        )
        if providers and selected and not namespace.offloaded
        else [],
    )


@dataclass
class DryRun:
    """What the API server said about a change without persisting it (``dryRun=All``)."""

    errors: list[str]
    warnings: list[str]
    checked: bool  # False when the API server could not be asked (the change can still be queued)


def dry_run(namespace_name: str, spec: dict[str, Any], managed: int | None = None) -> DryRun:
    """Ask the API server (and so Liqo's validating webhook) whether it would accept ``spec`` now (the
    bound cluster's, ``managed`` that cluster's pk for its snapshot; None: the default cluster). Only
    denials count as errors; an unreachable API server only means we could not check."""
    body: dict[str, Any] = {
        "apiVersion": f"{liqo.GROUP}/{liqo.VERSION}",
        "kind": "NamespaceOffloading",
        "metadata": {"name": liqo.OFFLOADING_NAME, "namespace": namespace_name},
        "spec": normalize_spec(spec),
    }
    try:
        if not Namespace.objects.of(managed).filter(name=namespace_name, offloaded=True).exists():
            # Not offloaded as far as the snapshot knows: the create is asked at once, without a read
            # (an offloading made since answers AlreadyExists, and then it is read and replaced).
            try:
                return DryRun([], kube.create_offloading(namespace_name, body, dry_run=True).warnings, True)
            except kube.KubeError as exc:
                if exc.kind != "exists":
                    raise
        current = kube.get_offloading(namespace_name, timeout=kube.DRY_RUN_TIMEOUT)
        if current is None:
            result = kube.create_offloading(namespace_name, body, dry_run=True)
        else:
            body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
            body["metadata"]["annotations"] = (current.get("metadata") or {}).get("annotations") or {}
            result = kube.replace_offloading(namespace_name, body, dry_run=True)
    except kube.KubeError as exc:
        if exc.kind in ("invalid", "forbidden", "not_found"):
            return DryRun([exc.message], [], True)
        return DryRun([], [], False)
    return DryRun([], result.warnings, True)
