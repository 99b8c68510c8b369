"""Simulated Liqo: the NamespaceOffloading webhook and controller, peers and provider clusters.

Every Liqo rule (defaults, schema, webhook messages, naming, selector matching, conditions, phase) comes
from `offloading.liqo`; this module only wires those rules to the store the way Liqo's controllers do
(liqo-semantics.md a.5, a.6, b.2, c.1-c.5):

* `admission` / `defaulter` / `validator`: CRD defaults + structural schema + the validating webhook.
* `reconcile_offloading(namespace)`: the NamespaceOffloading controller (finalizer, cluster selection per
  VirtualNode, desiredMapping patches, scheduling label, deletion flow, deferred status write).
* `reconcile_provider(cluster_id)`: the provider side of a NamespaceMap (remote namespaces in the peer's
  own store, currentMapping phases), delayed by the peer's latency, frozen while the peer is down.
* `reconcile_virtual_node(cluster_id)`: NamespaceMap per cluster and the virtual Node of each VirtualNode.
* `reconcile_pods(namespace)`: places demo pods on local or virtual nodes per the pod strategy.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from offloading.liqo import constants as c
from offloading.liqo.admission import webhook_admission
from offloading.liqo.schema import schema_errors
from offloading.liqo.selectors.match import cluster_matches, virtual_node_labels
from offloading.liqo.selectors.requirements import SelectorError
from offloading.liqo.spec import apply_defaults, is_dns1123_label, remote_namespace_name
from offloading.liqo.status import condition_list, offloading_phase
from sandbox.apiserver import PATCH_MERGE, ApiServer, now_iso
from sandbox.errors import ApiError
from sandbox.kinds import (
    EVENTS,
    FOREIGN_CLUSTERS,
    NAMESPACE_MAPS,
    NAMESPACE_OFFLOADINGS,
    NAMESPACES,
    NODES,
    PODS,
    STORED_KINDS,
    VIRTUAL_NODES,
    Kind,
)
from sandbox.runtime import Controller, Retry
from sandbox.store import Obj, Store, clone

if TYPE_CHECKING:
    from sandbox.faults import Faults, FaultSettings

MANAGER = "liqo-controller-manager"
WEBHOOK_NAME = "nsoff.validate.liqo.io"
REPLICATION_LABEL = "liqo.io/replication"
REMOTE_ID_LABEL = "liqo.io/remoteID"
RESOURCESLICE_LABEL = "liqo.io/resourceslice-name"


@dataclass
class Peer:
    """A provider (or consumer) cluster: its id, its own namespace store and its simulated behaviour."""

    cluster_id: str
    role: str = "Provider"
    namespace_delay: float = 0.0  # extra seconds before this provider processes its NamespaceMap
    offloading_healthy: bool = True
    store: Store = field(default_factory=Store)

    def namespaces(self) -> dict[str, Obj]:
        return {o["metadata"]["name"]: o for o in self.store.items(NAMESPACES)}


def tenant_namespace(cluster_id: str) -> str:
    return c.TENANT_NAMESPACE_PREFIX + cluster_id


class LiqoSimulation:
    def __init__(
        self,
        server: ApiServer,
        controller: Controller,
        faults: Faults,
        local_cluster_id: str,
        controller_delay: float = 0.0,
    ) -> None:
        self.server = server
        self.store = server.store
        self.controller = controller
        self.faults = faults
        self.local_cluster_id = local_cluster_id
        self.controller_delay = controller_delay
        self.peers: dict[str, Peer] = {}
        self._down: set[str] = set()
        server.defaulters[NAMESPACE_OFFLOADINGS.key] = self.defaulter
        server.validators[NAMESPACE_OFFLOADINGS.key] = self.validator
        server.admission.append(self.admission)
        self.store.add_listener(self.on_change)
        faults.add_listener(self.on_faults)
        controller.register("offloading", self.reconcile_offloading)
        controller.register("provider", self.reconcile_provider)
        controller.register("virtualnode", self.reconcile_virtual_node)
        controller.register("pods", self.reconcile_pods)
        controller.register("namespace", self.reconcile_namespace)
        controller.register("peer", self.reconcile_peer)

    # -- API server extension points ---------------------------------------------------------------
    @staticmethod
    def defaulter(obj: Obj) -> None:
        """The CRD's structural defaults (applied on every write, like the API server)."""
        if isinstance(obj.get("spec"), dict):
            obj["spec"] = apply_defaults(obj["spec"])

    @staticmethod
    def validator(obj: Obj, old: Obj | None) -> list[dict[str, str]]:
        if "spec" not in obj or obj["spec"] is None:
            return [{"field": "spec", "reason": "FieldValueRequired", "message": "Required value"}]
        causes = []
        for problem in schema_errors(obj["spec"]):
            field_path, _, detail = problem.message.partition(": ")
            if not detail:
                field_path, detail = "spec." + problem.field, problem.message
            reason = (
                "FieldValueNotSupported"
                if detail.startswith("Unsupported value")
                else "FieldValueRequired"
                if detail.startswith("Required value")
                else "FieldValueInvalid"
            )
            causes.append({"field": field_path, "reason": reason, "message": detail})
        return causes

    @staticmethod
    def admission(kind: Kind, operation: str, obj: Obj, old: Obj | None) -> list[str]:
        """The validating webhook nsoff.validate.liqo.io (objectSelector: liqo.io/webhook-skip NotIn [true])."""
        if kind is not NAMESPACE_OFFLOADINGS:
            return []

        def skipped(o: Obj | None) -> bool:
            return ((o or {}).get("metadata") or {}).get("labels", {}).get(c.WEBHOOK_SKIP_LABEL) == "true"

        # The object selector is evaluated on the new and the old object; the webhook runs if either matches.
        if skipped(obj) and (old is None or skipped(old)):
            return []
        denials, warnings = webhook_admission(
            operation,
            obj["metadata"].get("name", ""),
            obj.get("spec") or {},
            (old or {}).get("spec") if old is not None else None,
        )
        if denials:
            name = obj["metadata"].get("name", "")
            raise ApiError(
                403,
                "Forbidden",
                f'admission webhook "{WEBHOOK_NAME}" denied the request: {denials[0]}',
                {"name": name, "group": kind.group, "kind": kind.plural},
            )
        return warnings

    # -- change notifications (called under the store lock: only enqueue here) -----------------------
    def _delay(self) -> float:
        return self.controller_delay

    def enqueue_all_offloadings(self, delay: float | None = None) -> None:
        delay = self._delay() if delay is None else delay
        for obj in self.store.items(NAMESPACE_OFFLOADINGS):
            if obj["metadata"]["name"] == c.OFFLOADING_NAME:
                self.controller.enqueue("offloading", obj["metadata"]["namespace"], delay)

    def on_change(self, kind: Kind, event: str, obj: Obj, prev: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        delay = self._delay()
        if kind is NAMESPACE_OFFLOADINGS:
            if meta.get("name") == c.OFFLOADING_NAME:
                self.controller.enqueue("offloading", meta["namespace"], delay)
                self.controller.enqueue("pods", meta["namespace"], delay)
        elif kind is NAMESPACE_MAPS:
            cluster_id = (meta.get("labels") or {}).get(c.REMOTE_CLUSTER_ID_LABEL, "")
            if event in ("ADDED", "DELETED"):
                self.enqueue_all_offloadings()
                if cluster_id and event == "ADDED":
                    self.controller.enqueue("provider", cluster_id, self.provider_delay(cluster_id))
                return
            old_desired = ((prev or {}).get("spec") or {}).get("desiredMapping") or {}
            new_desired = (obj.get("spec") or {}).get("desiredMapping") or {}
            if old_desired != new_desired and cluster_id:
                self.controller.enqueue("provider", cluster_id, self.provider_delay(cluster_id))
            old_current = ((prev or {}).get("status") or {}).get("currentMapping") or {}
            new_current = (obj.get("status") or {}).get("currentMapping") or {}
            for ns in set(old_current) | set(new_current):
                if (old_current.get(ns) or {}).get("phase") != (new_current.get(ns) or {}).get("phase") or (
                    ns in old_current
                ) != (ns in new_current):
                    self.controller.enqueue("offloading", ns, delay)
        elif kind is VIRTUAL_NODES:
            self.enqueue_all_offloadings()
            cluster_id = (obj.get("spec") or {}).get("clusterID") or ""
            if cluster_id:
                self.controller.enqueue("virtualnode", cluster_id, delay)
        elif kind is NODES:
            if (meta.get("labels") or {}).get(c.VIRTUAL_NODE_TYPE_LABEL) == "virtual-node" or (
                (prev or {}).get("metadata", {}).get("labels") or {}
            ).get(c.VIRTUAL_NODE_TYPE_LABEL) == "virtual-node":
                self.enqueue_all_offloadings()
        elif kind is NAMESPACES:
            if meta.get("deletionTimestamp"):
                self.controller.enqueue("namespace", meta["name"], delay)
        elif kind is PODS and event == "ADDED" and not (obj.get("spec") or {}).get("nodeName"):
            self.controller.enqueue("pods", meta["namespace"], delay)
        if kind.namespaced and event == "DELETED":
            namespace = meta.get("namespace") or ""
            ns = self.store.get(NAMESPACES, "", namespace)
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self.controller.enqueue("namespace", namespace, delay)

    def on_faults(self, settings: FaultSettings) -> None:
        down = set(settings.peer_down)
        changed = down ^ self._down
        self._down = down
        for cluster_id in changed:
            if cluster_id in self.peers:
                self.controller.enqueue("peer", cluster_id, 0.0)
                if cluster_id not in down:
                    self.controller.enqueue("provider", cluster_id, self.provider_delay(cluster_id))

    def provider_delay(self, cluster_id: str) -> float:
        peer = self.peers.get(cluster_id)
        return self.controller_delay + (peer.namespace_delay if peer else 0.0)

    # -- helpers -----------------------------------------------------------------------------------
    def local_namespace_maps(self) -> dict[str, Obj]:
        """clusterID -> NamespaceMap for the maps Liqo considers local (replication + remoteID + cluster id)."""
        out: dict[str, Obj] = {}
        for nm in self.store.items(NAMESPACE_MAPS):
            labels = nm["metadata"].get("labels") or {}
            if (
                labels.get(REPLICATION_LABEL) == "true"
                and REMOTE_ID_LABEL in labels
                and labels.get(c.REMOTE_CLUSTER_ID_LABEL)
            ):
                out[labels[c.REMOTE_CLUSTER_ID_LABEL]] = nm
        return out

    def _patch(self, kind: Kind, namespace: str, name: str, body: dict[str, Any], subresource: str = "") -> Obj:
        return self.server.patch(kind, namespace, name, PATCH_MERGE, body, manager=MANAGER, subresource=subresource).obj

    def record_event(self, involved: Obj, event_type: str, reason: str, message: str) -> None:
        """An aggregated core/v1 Event like client-go's recorder (same object+reason+message: count++)."""
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        now = now_iso()
        for existing in self.store.items(EVENTS, namespace):
            inv = existing.get("involvedObject") or {}
            if (
                inv.get("uid") == meta.get("uid")
                and existing.get("reason") == reason
                and existing.get("message") == message
            ):
                self._patch(
                    EVENTS,
                    namespace,
                    existing["metadata"]["name"],
                    {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": now},
                )
                return
        suffix = hashlib.sha1(f"{meta.get('uid')}{reason}{message}{uuid.uuid4()}".encode()).hexdigest()[:16]
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{suffix}", "namespace": namespace},
            "involvedObject": {
                "kind": involved.get("kind"),
                "namespace": meta.get("namespace"),
                "name": meta["name"],
                "uid": meta.get("uid"),
                "apiVersion": involved.get("apiVersion"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": MANAGER},
            "reportingComponent": MANAGER,
            "reportingInstance": "",
        }
        self.server.create(EVENTS, namespace, event, manager=MANAGER)

    # -- the NamespaceOffloading controller ---------------------------------------------------------
    def reconcile_offloading(self, namespace: str) -> float | None:
        nsoff = self.store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        if nsoff is None:
            return None
        deleting = bool(nsoff["metadata"].get("deletionTimestamp"))
        error: Exception | None = None
        try:
            if deleting:
                self._deletion_flow(nsoff)
                return None
            self._ensure_finalizer(nsoff)
            if self._select_clusters(nsoff):
                self._scheduling_label(namespace, nsoff["spec"].get("podOffloadingStrategy"))
        except Retry as err:
            error = err
        finally:
            self._write_status(namespace)
        if error is not None:
            raise error
        return None

    def _ensure_finalizer(self, nsoff: Obj) -> None:
        finalizers = nsoff["metadata"].get("finalizers") or []
        if c.FINALIZER in finalizers:
            return
        body = clone(nsoff)
        body["metadata"]["finalizers"] = finalizers + [c.FINALIZER]
        try:
            self.server.update(
                NAMESPACE_OFFLOADINGS, nsoff["metadata"]["namespace"], c.OFFLOADING_NAME, body, manager=MANAGER
            )
        except ApiError as err:
            raise Retry(f"adding the finalizer: {err.message}") from None

    def _select_clusters(self, nsoff: Obj) -> bool:
        """Step 5: evaluate the selector per VirtualNode; False when stopped by an invalid selector."""
        namespace = nsoff["metadata"]["namespace"]
        maps = self.local_namespace_maps()
        virtual_nodes = self.store.items(VIRTUAL_NODES)
        for vn in virtual_nodes:
            cluster_id = (vn.get("spec") or {}).get("clusterID") or ""
            if cluster_id not in maps:
                raise Retry(f"no NamespaceMap found for remote cluster ID: {cluster_id}")
        spec = nsoff.get("spec") or {}
        remote = remote_namespace_name(namespace, self.local_cluster_id, spec)
        for vn in virtual_nodes:
            cluster_id = vn["spec"]["clusterID"]
            node = self.store.get(NODES, "", vn["metadata"]["name"])
            if node is not None and (node["metadata"].get("labels") or {}).get(c.REMOTE_CLUSTER_ID_LABEL) != cluster_id:
                node = None
            labels = virtual_node_labels(vn, node)
            try:
                selected = cluster_matches(
                    spec.get("clusterSelector"), labels, {"metadata.name": vn["metadata"]["name"]}
                )
            except SelectorError as err:
                self.record_event(
                    nsoff, "Warning", c.INVALID_SELECTOR_EVENT_REASON, c.INVALID_SELECTOR_EVENT_PREFIX + str(err)
                )
                return False
            nm = maps[cluster_id]
            desired = (nm.get("spec") or {}).get("desiredMapping") or {}
            if selected and desired.get(namespace) != remote:
                maps[cluster_id] = self._patch(
                    NAMESPACE_MAPS,
                    nm["metadata"]["namespace"],
                    nm["metadata"]["name"],
                    {"spec": {"desiredMapping": {namespace: remote}}},
                )
            elif not selected and namespace in desired:
                maps[cluster_id] = self._patch(
                    NAMESPACE_MAPS,
                    nm["metadata"]["namespace"],
                    nm["metadata"]["name"],
                    {"spec": {"desiredMapping": {namespace: None}}},
                )
        return True

    def _scheduling_label(self, namespace: str, strategy: str | None) -> None:
        ns = self.store.get(NAMESPACES, "", namespace)
        if ns is None:
            return
        labels = ns["metadata"].get("labels") or {}
        if strategy in (c.LOCAL_AND_REMOTE, c.REMOTE):
            if labels.get(c.SCHEDULING_LABEL) == "true":
                return
            new_labels = dict(labels, **{c.SCHEDULING_LABEL: "true"})
        else:
            if labels.get(c.SCHEDULING_LABEL) != "true":
                return
            new_labels = {k: v for k, v in labels.items() if k != c.SCHEDULING_LABEL}
        body = clone(ns)
        body["metadata"]["labels"] = new_labels
        try:
            self.server.update(NAMESPACES, "", namespace, body, manager=MANAGER)
        except ApiError as err:
            raise Retry(f"updating the namespace labels: {err.message}") from None

    def _deletion_flow(self, nsoff: Obj) -> None:
        namespace = nsoff["metadata"]["namespace"]
        ns = self.store.get(NAMESPACES, "", namespace)
        if ns is not None and (ns["metadata"].get("labels") or {}).get(c.SCHEDULING_LABEL) == "true":
            self._scheduling_label(namespace, c.LOCAL)
        for nm in self.local_namespace_maps().values():
            if namespace in ((nm.get("spec") or {}).get("desiredMapping") or {}):
                self._patch(
                    NAMESPACE_MAPS,
                    nm["metadata"]["namespace"],
                    nm["metadata"]["name"],
                    {"spec": {"desiredMapping": {namespace: None}}},
                )
        if (nsoff.get("status") or {}).get("remoteNamespacesConditions"):
            raise Retry("waiting for remote namespaces deletion", delay=max(self.controller_delay, 0.5))
        body = clone(nsoff)
        body["metadata"]["finalizers"] = [f for f in nsoff["metadata"].get("finalizers") or [] if f != c.FINALIZER]
        try:
            self.server.update(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME, body, manager=MANAGER)
        except ApiError as err:
            if err.code != 404:
                raise Retry(f"removing the finalizer: {err.message}") from None

    def _write_status(self, namespace: str) -> None:
        """The deferred status update: conditions per NamespaceMap, phase, observedGeneration (a.3, a.4)."""
        nsoff = self.store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        if nsoff is None:
            return
        deleting = bool(nsoff["metadata"].get("deletionTimestamp"))
        status = nsoff.get("status") or {}
        existing = status.get("remoteNamespacesConditions") or {}
        now = now_iso()
        conditions: dict[str, list[dict[str, Any]]] = {}
        required = ready = failed = 0
        for nm in self.local_namespace_maps().values():
            is_required = namespace in ((nm.get("spec") or {}).get("desiredMapping") or {})
            phase = (((nm.get("status") or {}).get("currentMapping") or {}).get(namespace) or {}).get("phase")
            required += is_required
            ready += phase == c.MAPPING_ACCEPTED
            failed += phase == c.MAPPING_CREATION_LOOP_BACKOFF
            listed = condition_list(
                existing.get(nm["metadata"]["name"]),
                required=is_required,
                mapping_phase=phase or None,
                now=now,
                deleting=deleting,
            )
            if listed:
                conditions[nm["metadata"]["name"]] = listed
        new_status = {
            "remoteNamespaceName": remote_namespace_name(namespace, self.local_cluster_id, nsoff.get("spec") or {}),
            "offloadingPhase": offloading_phase(deleting=deleting, required=required, ready=ready, failed=failed),
            "observedGeneration": nsoff["metadata"].get("generation"),
        }
        if conditions:
            new_status["remoteNamespacesConditions"] = conditions
        if new_status == status:
            return
        body = dict(nsoff, status=new_status)  # the API server copies what it stores
        try:
            self.server.update(
                NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME, body, manager=MANAGER, subresource="status"
            )
        except ApiError as err:
            if err.code == 409:
                raise Retry("status conflict") from None
            if err.code != 404:
                raise

    # -- the provider side of NamespaceMaps ---------------------------------------------------------
    def reconcile_provider(self, cluster_id: str) -> float | None:
        peer = self.peers.get(cluster_id)
        nm = self.local_namespace_maps().get(cluster_id)
        if peer is None or nm is None:
            return None
        if self.faults.peer_is_down(cluster_id):
            return None  # nothing is replicated while the peer is unreachable; on_faults re-enqueues
        nm_ref = f"{nm['metadata']['namespace']}/{nm['metadata']['name']}"
        desired = (nm.get("spec") or {}).get("desiredMapping") or {}
        current = clone((nm.get("status") or {}).get("currentMapping") or {})
        remote_store = peer.store
        again: float | None = None
        for local_ns, remote in desired.items():
            existing = remote_store.get(NAMESPACES, "", remote)
            previous = (current.get(local_ns) or {}).get("phase")
            if existing is None:
                if is_dns1123_label(remote):
                    remote_store.create(NAMESPACES, self._remote_namespace(remote, local_ns, nm_ref))
                    phase = c.MAPPING_ACCEPTED
                else:
                    phase = c.MAPPING_CREATION_LOOP_BACKOFF
            else:
                managed = (existing["metadata"].get("annotations") or {}).get(
                    c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION
                ) == nm_ref
                phase = c.MAPPING_ACCEPTED if managed else c.MAPPING_CREATION_LOOP_BACKOFF
                if managed and existing["metadata"].get("deletionTimestamp"):
                    # re-selected while being deleted: the deletion completes, then it is recreated
                    remote_store.remove(NAMESPACES, "", remote)
                    remote_store.create(NAMESPACES, self._remote_namespace(remote, local_ns, nm_ref))
            if previous == c.MAPPING_ACCEPTED and phase == c.MAPPING_CREATION_LOOP_BACKOFF and existing is None:
                phase = c.MAPPING_ACCEPTED  # a transient error on an accepted mapping keeps Accepted
            current[local_ns] = {"remoteNamespace": remote, "phase": phase}
        for local_ns in [ns for ns in current if ns not in desired]:
            remote = current[local_ns].get("remoteNamespace") or ""
            existing = remote_store.get(NAMESPACES, "", remote) if remote else None
            managed = (
                existing is not None
                and (existing["metadata"].get("annotations") or {}).get(c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION) == nm_ref
            )
            if not managed:
                del current[local_ns]
            elif current[local_ns].get("phase") != c.MAPPING_TERMINATING:
                meta = dict(existing["metadata"], deletionTimestamp=now_iso())
                remote_store.replace(NAMESPACES, dict(existing, metadata=meta, status={"phase": "Terminating"}), None)
                current[local_ns] = {"remoteNamespace": remote, "phase": c.MAPPING_TERMINATING}
                again = self.provider_delay(cluster_id)
            else:
                remote_store.remove(NAMESPACES, "", remote)
                del current[local_ns]
        old = (nm.get("status") or {}).get("currentMapping") or {}
        if current != old:
            body = clone(nm)
            body["status"] = dict(body.get("status") or {}, currentMapping=current)
            try:
                self.server.update(
                    NAMESPACE_MAPS,
                    nm["metadata"]["namespace"],
                    nm["metadata"]["name"],
                    body,
                    manager=MANAGER,
                    subresource="status",
                )
            except ApiError as err:
                raise Retry(f"NamespaceMap status: {err.message}") from None
        return again

    def _remote_namespace(self, name: str, local_ns: str, nm_ref: str) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now_iso(),
                "labels": {c.REMOTE_CLUSTER_ID_LABEL: self.local_cluster_id, "kubernetes.io/metadata.name": name},
                "annotations": {c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION: nm_ref, c.ORIGINAL_NAME_ANNOTATION: local_ns},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    # -- VirtualNodes, their Nodes and NamespaceMaps ------------------------------------------------
    def reconcile_virtual_node(self, cluster_id: str) -> float | None:
        vns = [vn for vn in self.store.items(VIRTUAL_NODES) if (vn.get("spec") or {}).get("clusterID") == cluster_id]
        tenant = tenant_namespace(cluster_id)
        nm = self.store.get(NAMESPACE_MAPS, tenant, cluster_id)
        if not vns:
            if nm is not None:
                self.server.delete(NAMESPACE_MAPS, tenant, cluster_id)
            return None
        if nm is None and self.store.get(NAMESPACES, "", tenant) is not None:
            self.server.create(NAMESPACE_MAPS, tenant, self.namespace_map(cluster_id), manager=MANAGER)
        for vn in vns:
            if vn["metadata"].get("deletionTimestamp"):
                continue
            if (vn.get("spec") or {}).get("createNode", True) is False:
                continue
            desired = self.node_for(vn)
            node = self.store.get(NODES, "", vn["metadata"]["name"])
            if node is None:
                self.server.create(NODES, "", desired, manager=MANAGER)
                continue
            labels = dict(node["metadata"].get("labels") or {})
            merged = dict(labels, **desired["metadata"]["labels"])
            capacity = desired["status"]["capacity"]
            if merged != labels or (node.get("status") or {}).get("capacity") != capacity:
                body = clone(node)
                body["metadata"]["labels"] = merged
                self.server.update(NODES, "", node["metadata"]["name"], body, manager=MANAGER)
                if (node.get("status") or {}).get("capacity") != capacity:
                    fresh = clone(self.store.must_get(NODES, "", node["metadata"]["name"]))
                    fresh["status"] = dict(fresh.get("status") or {}, capacity=capacity, allocatable=capacity)
                    self.server.update(
                        NODES, "", node["metadata"]["name"], fresh, manager=MANAGER, subresource="status"
                    )
        return None

    def namespace_map(self, cluster_id: str) -> Obj:
        return {
            "apiVersion": f"{c.GROUP}/{c.VERSION}",
            "kind": "NamespaceMap",
            "metadata": {
                "name": cluster_id,
                "namespace": tenant_namespace(cluster_id),
                "labels": {
                    c.REMOTE_CLUSTER_ID_LABEL: cluster_id,
                    REPLICATION_LABEL: "true",
                    REMOTE_ID_LABEL: cluster_id,
                },
            },
            "spec": {},
        }

    def node_for(self, vn: Obj) -> Obj:
        """The Node the virtual kubelet registers for a VirtualNode (c.3)."""
        spec = vn.get("spec") or {}
        name = vn["metadata"]["name"]
        cluster_id = spec.get("clusterID") or ""
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/role": "agent",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            c.VIRTUAL_NODE_TYPE_LABEL: c.VIRTUAL_NODE_TYPE_VALUE,
            "type": "virtual-kubelet",
            c.REMOTE_CLUSTER_ID_LABEL: cluster_id,
            "node.kubernetes.io/exclude-from-external-load-balancers": "true",
            "alpha.service-controller.kubernetes.io/exclude-balancer": "true",
        }
        labels.update(spec.get("labels") or {})
        labels[c.STORAGE_AVAILABLE_LABEL] = "true" if spec.get("storageClasses") else "false"
        taints = list(spec.get("taints") or []) + [
            {
                "key": c.VIRTUAL_NODE_TAINT_KEY,
                "value": c.VIRTUAL_NODE_TAINT_VALUE,
                "effect": c.VIRTUAL_NODE_TAINT_EFFECT,
            }
        ]
        capacity = dict(((spec.get("resourceQuota") or {}).get("hard")) or {})
        down = self.faults.peer_is_down(cluster_id)
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": dict(spec.get("annotations") or {})},
            "spec": {"taints": taints},
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [self._node_ready(not down)],
                "nodeInfo": {
                    "kubeletVersion": "v1.35.2",
                    "osImage": "Liqo virtual node",
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "containerRuntimeVersion": "liqo://v1.0.0",
                    "kernelVersion": "",
                    "kubeProxyVersion": "",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
                "addresses": [{"type": "InternalIP", "address": "10.42.0.1"}],
            },
        }

    @staticmethod
    def _node_ready(ready: bool) -> dict[str, Any]:
        now = now_iso()
        if ready:
            return {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "The Liqo Virtual Kubelet is posting ready status",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        return {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    # -- peers going up / down ----------------------------------------------------------------------
    def reconcile_peer(self, cluster_id: str) -> float | None:
        """Reflect a peer's reachability on its ForeignCluster, VirtualNodes and Nodes."""
        peer = self.peers.get(cluster_id)
        if peer is None:
            return None
        up = not self.faults.peer_is_down(cluster_id)
        fc = self.store.get(FOREIGN_CLUSTERS, "", cluster_id)
        if fc is not None:
            body = clone(fc)
            body["status"] = self.foreign_cluster_status(peer, up)
            self.server.update(FOREIGN_CLUSTERS, "", cluster_id, body, manager=MANAGER, subresource="status")
        for vn in self.store.items(VIRTUAL_NODES):
            if (vn.get("spec") or {}).get("clusterID") != cluster_id:
                continue
            body = clone(vn)
            body["status"] = self.virtual_node_status(peer, up)
            self.server.update(
                VIRTUAL_NODES,
                vn["metadata"]["namespace"],
                vn["metadata"]["name"],
                body,
                manager=MANAGER,
                subresource="status",
            )
            node = self.store.get(NODES, "", vn["metadata"]["name"])
            if node is not None:
                body = clone(node)
                conditions = [
                    cond for cond in (body.get("status") or {}).get("conditions") or [] if cond.get("type") != "Ready"
                ]
                body["status"] = dict(body.get("status") or {}, conditions=conditions + [self._node_ready(up)])
                self.server.update(NODES, "", node["metadata"]["name"], body, manager=MANAGER, subresource="status")
        return None

    @staticmethod
    def _condition(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {"type": ctype, "status": status, "lastTransitionTime": now_iso(), "reason": reason, "message": message}

    def foreign_cluster_status(self, peer: Peer, up: bool = True) -> dict[str, Any]:
        cond = self._condition
        provider = peer.role in ("Provider", "ConsumerAndProvider")
        consumer = peer.role in ("Consumer", "ConsumerAndProvider")
        if up:
            api = cond("APIServerStatus", "Established", "APIServerReady", "The remote API server is ready")
            net = [
                cond(
                    "NetworkConfigurationStatus",
                    "Ready",
                    "NetworkConfigurationReady",
                    "The network configuration has been exchanged",
                ),
                cond(
                    "NetworkConnectionStatus",
                    "Established",
                    "ConnectionEstablished",
                    "The network connection with the foreign cluster is established",
                ),
                cond("NetworkGatewayPresence", "Established", "GatewayPresent", "The gateway is present"),
            ]
        else:
            api = cond("APIServerStatus", "Error", "APIServerNotReady", "The remote API server is not reachable")
            net = [
                cond(
                    "NetworkConfigurationStatus",
                    "Ready",
                    "NetworkConfigurationReady",
                    "The network configuration has been exchanged",
                ),
                cond(
                    "NetworkConnectionStatus",
                    "Error",
                    "ConnectionError",
                    "The network connection with the foreign cluster is not working",
                ),
                cond("NetworkGatewayPresence", "Established", "GatewayPresent", "The gateway is present"),
            ]
        auth = []
        if consumer:
            auth.append(cond("AuthTenantStatus", "Ready", "TenantReady", "The tenant has been correctly configured"))
        if provider:
            auth.append(
                cond(
                    "AuthIdentityControlPlaneStatus",
                    "Ready",
                    "IdentityReady",
                    "The identity has been correctly configured",
                )
            )
        offloading: dict[str, Any] = {"enabled": provider, "conditions": []}
        if provider:
            healthy = peer.offloading_healthy and up
            if healthy:
                offloading["conditions"] = [
                    cond("OffloadingVirtualNodeStatus", "Ready", "VirtualNodesReady", "All virtual nodes are ready"),
                    cond("OffloadingNodeStatus", "Ready", "NodesReady", "All nodes are ready"),
                ]
            else:
                offloading["conditions"] = [
                    cond(
                        "OffloadingVirtualNodeStatus", "NotReady", "VirtualNodesNotReady", "No virtual nodes are ready"
                    ),
                    cond("OffloadingNodeStatus", "NotReady", "NodesNotReady", "No nodes are ready"),
                ]
        return {
            "role": peer.role,
            "modules": {
                "networking": {"enabled": True, "conditions": net},
                "authentication": {"enabled": True, "conditions": auth},
                "offloading": offloading,
            },
            "apiServerUrl": f"https://{peer.cluster_id}.liqo.example:6443",
            "tenantNamespace": {
                "local": tenant_namespace(peer.cluster_id),
                "remote": tenant_namespace(self.local_cluster_id),
            },
            "conditions": [api],
        }

    def virtual_node_status(self, peer: Peer, up: bool = True) -> dict[str, Any]:
        if up and peer.offloading_healthy:
            vk, node = (
                ("Running", "VirtualKubeletRunning", "The virtual kubelet is running"),
                ("Running", "NodeRunning", "The node is running"),
            )
        else:
            vk, node = (
                ("Creating", "VirtualKubeletCreating", "The virtual kubelet is not ready"),
                ("Creating", "NodeCreating", "The node is not ready"),
            )
        return {"conditions": [self._condition("VirtualKubelet", *vk), self._condition("Node", *node)]}

    # -- namespace lifecycle (kube-controller-manager's namespace controller) -----------------------
    def reconcile_namespace(self, name: str) -> float | None:
        ns = self.store.get(NAMESPACES, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        remaining = 0
        for kind in STORED_KINDS:
            if not kind.namespaced:
                continue
            for obj in self.store.items(kind, name):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    try:
                        self.server.delete(kind, name, obj["metadata"]["name"])
                    except ApiError as err:
                        if err.code != 404:
                            raise
        if remaining and any(self.store.items(kind, name) for kind in STORED_KINDS if kind.namespaced):
            return None  # deletions of the remaining objects re-enqueue this namespace
        self.server.finalize_namespace(name)
        return None

    # -- demo pods ---------------------------------------------------------------------------------
    def reconcile_pods(self, namespace: str) -> float | None:
        """Bind pending pods: local nodes, and virtual nodes of clusters where the namespace is ready."""
        pending = [
            p
            for p in self.store.items(PODS, namespace)
            if not (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]
        if not pending:
            return None
        nsoff = self.store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        strategy = ((nsoff or {}).get("spec") or {}).get("podOffloadingStrategy") if nsoff else c.LOCAL
        ready_clusters = set()
        for cluster_id, conds in (((nsoff or {}).get("status") or {}).get("remoteNamespacesConditions") or {}).items():
            if any(cd.get("type") == "Ready" and cd.get("status") == "True" for cd in conds):
                ready_clusters.add(cluster_id)
        local_nodes, virtual_nodes = [], []
        for node in self.store.items(NODES):
            labels = node["metadata"].get("labels") or {}
            if labels.get(c.VIRTUAL_NODE_TYPE_LABEL) == c.VIRTUAL_NODE_TYPE_VALUE:
                if labels.get(c.REMOTE_CLUSTER_ID_LABEL) in ready_clusters and not self.faults.peer_is_down(
                    labels.get(c.REMOTE_CLUSTER_ID_LABEL, "")
                ):
                    virtual_nodes.append(node["metadata"]["name"])
            elif "node-role.kubernetes.io/control-plane" not in labels:
                local_nodes.append(node["metadata"]["name"])
        candidates = {c.LOCAL: local_nodes, c.REMOTE: virtual_nodes}.get(strategy or "", local_nodes + virtual_nodes)
        if not candidates:
            return None
        for pod in pending:
            index = int(hashlib.sha1(pod["metadata"]["name"].encode()).hexdigest(), 16) % len(candidates)
            node_name = candidates[index]
            body = clone(pod)
            body["spec"]["nodeName"] = node_name
            on_virtual = node_name in virtual_nodes
            if on_virtual:
                body["metadata"].setdefault("labels", {})[c.SHADOW_POD_LABEL] = "true"
            pod_updated = self.server.update(PODS, namespace, pod["metadata"]["name"], body, manager="kube-scheduler")
            fresh = clone(pod_updated.obj)
            fresh["status"] = running_pod_status(fresh, on_virtual)
            self.server.update(PODS, namespace, pod["metadata"]["name"], fresh, manager="kubelet", subresource="status")
        return None


def running_pod_status(pod: Obj, on_virtual: bool) -> dict[str, Any]:
    now = now_iso()
    digest = int(hashlib.sha1(pod["metadata"]["name"].encode()).hexdigest(), 16)
    ip = f"10.{(71 if on_virtual else 244)}.{digest % 250}.{(digest >> 8) % 250 + 2}"
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        "phase": "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "hostIP": "10.42.0.1",
        "startTime": now,
        "qosClass": "BestEffort",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
        "containerStatuses": [
            {
                "name": ct.get("name"),
                "image": ct.get("image"),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for ct in containers
        ],
    }
