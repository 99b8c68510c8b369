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
from sandbox.kinds import DEPLOYMENTS, NAMESPACE_OFFLOADINGS, NAMESPACES, NODES, VIRTUAL_NODES
from sandbox.liqo.context import SELECT_PHASE, STATUS_PHASE, LiqoContext
from sandbox.liqo.desired import DesiredWrites, Then
from sandbox.liqo.events import record_event
from sandbox.runtime import Retry
from sandbox.store import Obj, clone

log = logging.getLogger(__name__)


class OffloadingController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx
        self._selections = SelectionCache(ctx)
        self.writes = DesiredWrites(ctx)  # desiredMapping entries, written one patch per map

    def reconcile(self, namespace: str) -> float | None:
        if self.ctx.faults.controller_is_down():
            return None  # the controller manager is not running; the simulation re-enqueues when it is back
        nsoff = self.ctx.store.get(NAMESPACE_OFFLOADINGS, namespace, c.OFFLOADING_NAME)
        if nsoff is None:
            return None
        waits = False  # the rest of the pass waits for its desiredMapping writes (sandbox.liqo.desired)
        try:
            if nsoff["metadata"].get("deletionTimestamp"):
                waits = self._deletion_flow(nsoff)
                return None
            self._ensure_finalizer(nsoff)
            if self.ctx.bulk_phase == STATUS_PHASE:
                return None  # selected in SELECT_PHASE; only the status is left (written below)
            waits = self._select_clusters(nsoff)
        finally:
            if not waits:
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

    def _set_desired(self, cluster_id: str, nm: Obj, namespace: str, remote: str | None) -> None:
        """A desiredMapping entry to write: gathered for one patch per map at the start of a large fleet
        (SELECT_PHASE), otherwise grouped with the entries of other namespaces (sandbox.liqo.desired)."""
        if self.ctx.bulk_phase == SELECT_PHASE:
            desired = self.ctx.pending_desired.setdefault(cluster_id, dict(_desired_of(nm)))
            desired[namespace] = remote
        else:
            self.writes.add(cluster_id, nm, namespace, remote)

    def _desired(self, cluster_id: str, nm: Obj) -> dict[str, Any]:
        """The map's desiredMapping with the entries not written yet."""
        if self.ctx.bulk_phase == SELECT_PHASE:
            return self.ctx.pending_desired.get(cluster_id, _desired_of(nm))
        return self.writes.desired(cluster_id, nm)

    def _then(self, namespace: str, planned: bool, rest: Then) -> bool:
        """Run ``rest`` (with the errors of the entries written) now, or once the entries are written:
        True when it waits (for this pass's entries, or behind an older pass of the namespace)."""
        if self.ctx.bulk_phase != SELECT_PHASE and (planned or self.writes.waiting(namespace)):

            def later(failed: list[ApiError]) -> None:
                try:
                    rest(failed)
                finally:
                    self._write_status(namespace)  # deferred: also when the rest fails (a.4)

            self.writes.then(namespace, later)
            return True
        rest([])
        return False

    def _select_clusters(self, nsoff: Obj) -> bool:
        """Step 5 (a.5): the selector per VirtualNode, the desiredMapping entries, then the scheduling
        label (or the swallowed error, or the event of an invalid selector) and the status. True when
        that rest waits for the entries to be written (it then writes the status itself)."""
        namespace = nsoff["metadata"]["namespace"]
        maps = self.ctx.local_namespace_maps()
        virtual_nodes = self.ctx.store.items(VIRTUAL_NODES)
        vn_clusters = [(vn.get("spec") or {}).get("clusterID") or "" for vn in virtual_nodes]
        blocked = versions.selection_blocked(_release(self.ctx), vn_clusters, maps)
        if blocked:
            # Up to v1.1 the controller counts VirtualNode clusters and NamespaceMaps first: an orphaned
            # map stops every selection, and the error only reaches the log (issue 27, item 5).
            self._swallow(nsoff, blocked)
            return False
        for vn in virtual_nodes:
            cluster_id = (vn.get("spec") or {}).get("clusterID") or ""
            if cluster_id not in maps:
                # Swallowed as in Liqo: the deferred status write clears the error (issue 27).
                self._swallow(nsoff, f"no NamespaceMap found for remote cluster ID: {cluster_id}")
                return False
        spec = nsoff.get("spec") or {}
        selection = self._selections.select(spec.get("clusterSelector"), virtual_nodes)
        remote = remote_namespace_name(namespace, self.ctx.local_cluster_id, spec)
        error = None
        planned = False
        for cluster_id, entry in selection.items():
            error = error or entry["error"]
            if all(why["error"] for _, why in entry["explanations"]):
                continue  # not reached, or stopped at its first VirtualNode: its mapping stays as it is
            desired = self._desired(cluster_id, maps[cluster_id])
            if entry["selected"] and desired.get(namespace) != remote:
                self._set_desired(cluster_id, maps[cluster_id], namespace, remote)
                planned = True
            elif not entry["selected"] and namespace in desired:
                self._set_desired(cluster_id, maps[cluster_id], namespace, None)
                planned = True
        strategy = spec.get("podOffloadingStrategy")

        def rest(failed: list[ApiError]) -> None:
            if failed and not error:
                self._swallow(nsoff, "; ".join(err.message for err in failed))  # as errors.Join in Liqo
            elif error:
                record_event(
                    self.ctx, nsoff, "Warning", c.INVALID_SELECTOR_EVENT_REASON, c.INVALID_SELECTOR_EVENT_PREFIX + error
                )
            else:
                self._scheduling_label(namespace, strategy)

        return self._then(namespace, planned, rest)

    def _swallow(self, nsoff: Obj, message: str) -> None:
        """A reconcile error Liqo only logs: the status is still written (deferred) and clears it, so no
        retry comes before the next event (namespaceoffloading_controller.go)."""
        log.error(
            'Failed to reconcile NamespaceOffloading "%s/offloading": %s', nsoff["metadata"]["namespace"], message
        )
        self.ctx.swallowed.append((nsoff["metadata"]["namespace"], message))
        del self.ctx.swallowed[:-100]

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

    def _deletion_flow(self, nsoff: Obj) -> bool:
        """The scheduling label off, the namespace out of every desiredMapping, then (once Liqo removed
        the remote namespaces) the finalizer. True when the rest waits for the entries to be written."""
        namespace = nsoff["metadata"]["namespace"]
        self._scheduling_label(namespace, c.LOCAL)
        planned = False
        for cluster_id, nm in self.ctx.local_namespace_maps().items():
            if namespace in self._desired(cluster_id, nm):
                self._set_desired(cluster_id, nm, namespace, None)
                planned = True

        def rest(failed: list[ApiError]) -> None:
            if failed:
                raise failed[0]  # as a failed patch: logged, retried with the controller's backoff
            _remove_finalizer(self.ctx, nsoff)

        return self._then(namespace, planned, rest)

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


def _release(ctx: LiqoContext) -> versions.Behaviour:
    """The behaviour of the Liqo version the scenario installed (the controller manager's image tag)."""
    for deployment in ctx.store.items(DEPLOYMENTS):
        if versions.is_controller_manager(deployment):
            return versions.behaviour(versions.controller_manager_version(deployment))
    return versions.behaviour("")


def _remove_finalizer(ctx: LiqoContext, nsoff: Obj) -> None:
    """Once Liqo removed the remote namespaces (the status has no conditions left): the finalizer off."""
    if (nsoff.get("status") or {}).get("remoteNamespacesConditions"):
        raise Retry("waiting for remote namespaces deletion", delay=max(ctx.controller_delay, 0.5))
    body = clone(nsoff)
    body["metadata"]["finalizers"] = [f for f in nsoff["metadata"].get("finalizers") or [] if f != c.FINALIZER]
    try:
        ctx.write(NAMESPACE_OFFLOADINGS, body)
    except ApiError as err:
        if err.code != 404:
            raise Retry(f"removing the finalizer: {err.message}") from None


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
