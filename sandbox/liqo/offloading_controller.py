"""The NamespaceOffloading controller (liqo-semantics.md a.3-a.6): finalizer, cluster selection per
VirtualNode, desiredMapping patches, the scheduling label, the deletion flow and the deferred status write.
Selection and status come from `liqo_rules`; this module reads and writes the store."""

from __future__ import annotations

import json
import logging
from typing import Any

from liqo_rules import constants as c
from liqo_rules import versions
from liqo_rules.peers import node_of, select_clusters
from liqo_rules.selectors.match import virtual_node_labels
from liqo_rules.spec import remote_namespace_name
from liqo_rules.status import compute_status
from sandbox.apicommon import now_iso
from sandbox.errors import ApiError
from sandbox.kinds import DEPLOYMENTS, NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS, NAMESPACES, NODES, VIRTUAL_NODES
from sandbox.liqo.context import SELECT_PHASE, STATUS_PHASE, LiqoContext
from sandbox.liqo.events import record_event
from sandbox.runtime import Retry
from sandbox.store import Obj, clone

log = logging.getLogger(__name__)


class OffloadingController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx
        self._selections = SelectionCache(ctx)

    def reconcile(self, namespace: str) -> float | None:
        if self.ctx.faults.controller_is_down():
            return None  # the controller manager is not running; the simulation re-enqueues when it is back
        nsoff = self.ctx.store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        if nsoff is None:
            return None
        try:
            if nsoff["metadata"].get("deletionTimestamp"):
                self._deletion_flow(nsoff)
                return None
            self._ensure_finalizer(nsoff)
            if self.ctx.bulk_phase == STATUS_PHASE:
                return None  # selected in SELECT_PHASE; only the status is left (written below)
            if self._select_clusters(nsoff):
                self._scheduling_label(namespace, nsoff["spec"].get("podOffloadingStrategy"))
        finally:
            self._write_status(namespace)  # deferred: also when the reconcile fails (a.4)
        return None

    def _ensure_finalizer(self, nsoff: Obj) -> None:
        finalizers = nsoff["metadata"].get("finalizers") or []
        if c.FINALIZER in finalizers:
            return
        body = clone(nsoff)
        body["metadata"]["finalizers"] = finalizers + [c.FINALIZER]
        try:
            self.ctx.write(NAMESPACE_OFFLOADINGS, body)
        except ApiError as err:
            raise Retry(f"adding the finalizer: {err.message}") from None

    def _set_desired(self, nm: Obj, namespace: str, remote: str | None) -> Obj | None:
        meta = nm["metadata"]
        if self.ctx.bulk_phase == SELECT_PHASE:  # the start of a large fleet: one patch per map at the end
            cluster_id = meta["labels"][c.REMOTE_CLUSTER_ID_LABEL]
            desired = self.ctx.pending_desired.setdefault(cluster_id, dict(_desired_of(nm)))
            desired[namespace] = remote
            return None
        peer = self.ctx.peers.get(meta["labels"].get(c.REMOTE_CLUSTER_ID_LABEL, ""))
        if peer is not None and not peer.namespace_map_writable:
            verb = "adding" if remote else "removing"
            raise ApiError(
                403,
                "Forbidden",
                f'{verb} namespace "{namespace}" {"to" if remote else "from"} NamespaceMap {meta["name"]}: '
                f'namespacemaps.offloading.liqo.io "{meta["name"]}" is forbidden',
            )
        return self.ctx.patch(
            NAMESPACE_MAPS, meta["namespace"], meta["name"], {"spec": {"desiredMapping": {namespace: remote}}}
        )

    def _select_clusters(self, nsoff: Obj) -> bool:
        """Step 5 (a.5): the selector per VirtualNode; False when an invalid selector stopped the pass."""
        namespace = nsoff["metadata"]["namespace"]
        maps = self.ctx.local_namespace_maps()
        virtual_nodes = self.ctx.store.items(VIRTUAL_NODES)
        vn_clusters = [(vn.get("spec") or {}).get("clusterID") or "" for vn in virtual_nodes]
        blocked = versions.selection_blocked(self._release(), vn_clusters, maps)
        if blocked:
            # Up to v1.1 the controller counts VirtualNode clusters and NamespaceMaps first: an orphaned
            # map stops every selection, and the error only reaches the log (issue 27, item 5).
            return self._swallow(nsoff, blocked)
        for vn in virtual_nodes:
            cluster_id = (vn.get("spec") or {}).get("clusterID") or ""
            if cluster_id not in maps:
                # Swallowed as in Liqo: the deferred status write clears the error (issue 27).
                return self._swallow(nsoff, f"no NamespaceMap found for remote cluster ID: {cluster_id}")
        spec = nsoff.get("spec") or {}
        selection = self._selections.select(spec.get("clusterSelector"), virtual_nodes)
        remote = remote_namespace_name(namespace, self.ctx.local_cluster_id, spec)
        error = None
        failed: list[str] = []
        for cluster_id, entry in selection.items():
            error = error or entry["error"]
            if all(why["error"] for _, why in entry["explanations"]):
                continue  # not reached, or stopped at its first VirtualNode: its mapping stays as it is
            desired = (maps[cluster_id].get("spec") or {}).get("desiredMapping") or {}
            desired = self.ctx.pending_desired.get(cluster_id, desired)
            try:
                if entry["selected"] and desired.get(namespace) != remote:
                    self._set_desired(maps[cluster_id], namespace, remote)
                elif not entry["selected"] and namespace in desired:
                    self._set_desired(maps[cluster_id], namespace, None)
            except ApiError as err:
                failed.append(err.message)  # joined, as errors.Join in enforceClusterSelector
        if failed and not error:
            return self._swallow(nsoff, "; ".join(failed))
        if error:
            record_event(
                self.ctx, nsoff, "Warning", c.INVALID_SELECTOR_EVENT_REASON, c.INVALID_SELECTOR_EVENT_PREFIX + error
            )
            return False
        return True

    def _release(self) -> versions.Behaviour:
        """The behaviour of the Liqo version the scenario installed (the controller manager's image tag)."""
        for deployment in self.ctx.store.items(DEPLOYMENTS):
            if versions.is_controller_manager(deployment):
                return versions.behaviour(versions.controller_manager_version(deployment))
        return versions.behaviour("")

    def _swallow(self, nsoff: Obj, message: str) -> bool:
        """A reconcile error Liqo only logs: the status is still written (deferred) and clears it, so no
        retry comes before the next event (namespaceoffloading_controller.go). False: the pass stopped."""
        log.error(
            'Failed to reconcile NamespaceOffloading "%s/offloading": %s', nsoff["metadata"]["namespace"], message
        )
        self.ctx.swallowed.append((nsoff["metadata"]["namespace"], message))
        del self.ctx.swallowed[:-100]
        return False

    def _scheduling_label(self, namespace: str, strategy: str | None) -> None:
        ns = self.ctx.store.get(NAMESPACES, "", namespace)
        if ns is None:
            return
        labels = ns["metadata"].get("labels") or {}
        enabled = labels.get(c.SCHEDULING_LABEL) == "true"
        if strategy in (c.LOCAL_AND_REMOTE, c.REMOTE):
            if enabled:
                return
            new_labels = dict(labels, **{c.SCHEDULING_LABEL: "true"})
        else:
            if not enabled:
                return
            new_labels = {k: v for k, v in labels.items() if k != c.SCHEDULING_LABEL}
        body = clone(ns)
        body["metadata"]["labels"] = new_labels
        try:
            self.ctx.write(NAMESPACES, body)
        except ApiError as err:
            raise Retry(f"updating the namespace labels: {err.message}") from None

    def _deletion_flow(self, nsoff: Obj) -> None:
        namespace = nsoff["metadata"]["namespace"]
        self._scheduling_label(namespace, c.LOCAL)
        for nm in self.ctx.local_namespace_maps().values():
            if namespace in ((nm.get("spec") or {}).get("desiredMapping") or {}):
                self._set_desired(nm, namespace, None)
        if (nsoff.get("status") or {}).get("remoteNamespacesConditions"):
            raise Retry("waiting for remote namespaces deletion", delay=max(self.ctx.controller_delay, 0.5))
        body = clone(nsoff)
        body["metadata"]["finalizers"] = [f for f in nsoff["metadata"].get("finalizers") or [] if f != c.FINALIZER]
        try:
            self.ctx.write(NAMESPACE_OFFLOADINGS, body)
        except ApiError as err:
            if err.code != 404:
                raise Retry(f"removing the finalizer: {err.message}") from None

    def _write_status(self, namespace: str) -> None:
        """The deferred status update: conditions per NamespaceMap, phase, observedGeneration (a.3, a.4)."""
        if self.ctx.bulk_phase == SELECT_PHASE:
            return  # written once the providers answered (Sandbox.start)
        nsoff = self.ctx.store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        if nsoff is None:
            return
        status = compute_status(
            namespace,
            nsoff,
            list(self.ctx.local_namespace_maps().values()),
            local_cluster_id=self.ctx.local_cluster_id,
            now=now_iso(),
        )
        if status == (nsoff.get("status") or {}):
            return
        try:
            self.ctx.write(NAMESPACE_OFFLOADINGS, dict(nsoff, status=status), subresource="status")
        except ApiError as err:
            if err.code == 409:
                raise Retry("status conflict") from None
            if err.code != 404:
                raise


def _desired_of(nm: Obj) -> dict[str, Any]:
    return (nm.get("spec") or {}).get("desiredMapping") or {}


class SelectionCache:
    """Selection depends only on the selector and the VirtualNodes (and their Nodes): fleets share a
    handful of selectors, so the verdicts are kept per (selector, VirtualNode versions)."""

    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx
        self._selections: dict[tuple[str, tuple[str, ...]], dict[str, dict[str, Any]]] = {}
        self._labels: tuple[tuple[str, ...], list[tuple[str, str, dict[str, str]]]] | None = None

    def select(self, selector: Any, virtual_nodes: list[Obj]) -> dict[str, dict[str, Any]]:
        nodes: dict[str, Obj] = {}
        for vn in virtual_nodes:
            node = self.ctx.store.get(NODES, "", vn["metadata"]["name"])
            if node is not None:
                nodes[vn["metadata"]["name"]] = node
        versions = tuple(
            f"{vn['metadata'].get('uid')}:{vn['metadata'].get('resourceVersion')}:"
            f"{(nodes.get(vn['metadata']['name']) or {}).get('metadata', {}).get('resourceVersion')}"
            for vn in virtual_nodes
        )
        if self._labels is None or self._labels[0] != versions:
            labelled = [
                (vn["spec"]["clusterID"], vn["metadata"]["name"], virtual_node_labels(vn, node_of(vn, nodes)))
                for vn in virtual_nodes
            ]
            self._labels = (versions, labelled)
            self._selections.clear()
        key = (json.dumps(selector, sort_keys=True), versions)
        found = self._selections.get(key)
        if found is None:
            if len(self._selections) > 256:
                self._selections.clear()
            found = self._selections[key] = select_clusters(selector, self._labels[1], terms=False)
        return found
