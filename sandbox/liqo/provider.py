"""The provider side of a NamespaceMap (liqo-semantics.md c.4): remote namespaces in the peer's own store
and the currentMapping phases, delayed by the peer's latency and frozen while the peer is down."""

from __future__ import annotations

import uuid

from liqo_rules import constants as c
from liqo_rules.spec import is_dns1123_label
from sandbox.apicommon import now_iso
from sandbox.errors import ApiError
from sandbox.kinds import NAMESPACE_MAPS, NAMESPACES
from sandbox.liqo.context import LiqoContext, Mapping
from sandbox.objects import Obj, clone
from sandbox.runtime import Retry
from sandbox.store import Store

# Seconds between looks at a twin that a peer with its own namespace controller is finalizing (a domain).
FINALIZE_POLL = 0.05


class ProviderController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx

    def reconcile(self, cluster_id: str) -> float | None:
        peer = self.ctx.peers.get(cluster_id)
        nm = self.ctx.local_namespace_maps().get(cluster_id)
        if peer is None or nm is None:
            return None
        if self.ctx.faults.peer_is_down(cluster_id):
            return None  # nothing is replicated while the peer is unreachable; the simulation re-enqueues
        nm_ref = peer.map_ref or f"{nm['metadata']['namespace']}/{nm['metadata']['name']}"
        desired: dict[str, str] = (nm.get("spec") or {}).get("desiredMapping") or {}
        old: dict[str, Mapping] = (nm.get("status") or {}).get("currentMapping") or {}
        current: dict[str, Mapping] = clone(old)
        for local_ns, remote in desired.items():
            previous = old.get(local_ns)
            phase = previous.get("phase") if isinstance(previous, dict) else None
            current[local_ns] = self._create(peer.store, local_ns, remote, nm_ref, phase)
        again = None
        for local_ns in [ns for ns in current if ns not in desired]:
            if self._tear_down(peer.store, current, local_ns, nm_ref, peer.finalizes_namespaces):
                again = self.ctx.provider_delay(cluster_id)
                if peer.finalizes_namespaces:
                    again = max(again, FINALIZE_POLL)
        if current != old:
            body = clone(nm)
            body["status"] = dict(body.get("status") or {}, currentMapping=current)
            try:
                self.ctx.write(NAMESPACE_MAPS, body, subresource="status")
            except ApiError as err:
                raise Retry(f"NamespaceMap status: {err.message}") from None
        return again

    def _create(self, store: Store, local_ns: str, remote: str, nm_ref: str, previous: str | None) -> Mapping:
        """Create the remote namespace if needed; the mapping phase that results."""
        existing = store.get(NAMESPACES, "", remote)
        if existing is None:
            if is_dns1123_label(remote):
                store.create(NAMESPACES, self._remote_namespace(remote, local_ns, nm_ref))
                phase = c.MAPPING_ACCEPTED
            elif previous == c.MAPPING_ACCEPTED:
                phase = c.MAPPING_ACCEPTED  # a transient error on an accepted mapping keeps Accepted
            else:
                phase = c.MAPPING_CREATION_LOOP_BACKOFF
        elif _managed_by(existing, nm_ref):
            phase = c.MAPPING_ACCEPTED
            if existing["metadata"].get("deletionTimestamp"):
                # re-selected while being deleted: the deletion completes, then it is recreated
                store.remove(NAMESPACES, "", remote)
                store.create(NAMESPACES, self._remote_namespace(remote, local_ns, nm_ref))
        else:
            phase = c.MAPPING_CREATION_LOOP_BACKOFF  # a namespace of that name exists, not ours
        return {"remoteNamespace": remote, "phase": phase}

    @staticmethod
    def _tear_down(
        store: Store, current: dict[str, Mapping], local_ns: str, nm_ref: str, finalized_there: bool = False
    ) -> bool:
        """Delete a de-selected remote namespace in two steps (Terminating, then gone); True to come back."""
        remote = current[local_ns].get("remoteNamespace") or ""
        existing = store.get(NAMESPACES, "", remote) if remote else None
        if existing is None or not _managed_by(existing, nm_ref):
            del current[local_ns]
            return False
        if current[local_ns].get("phase") != c.MAPPING_TERMINATING:
            meta = dict(existing["metadata"], deletionTimestamp=now_iso())
            store.replace(NAMESPACES, dict(existing, metadata=meta, status={"phase": "Terminating"}), None)
            current[local_ns] = {"remoteNamespace": remote, "phase": c.MAPPING_TERMINATING}
            return True
        if finalized_there:
            return True  # the peer's own namespace controller empties and removes it: look again later
        try:
            store.remove(NAMESPACES, "", remote)
        except ApiError as err:  # finalized meanwhile by the peer's own namespace controller (a domain)
            if err.code != 404:
                raise
        del current[local_ns]
        return False

    def _remote_namespace(self, name: str, local_ns: str, nm_ref: str) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now_iso(),
                "labels": {c.REMOTE_CLUSTER_ID_LABEL: self.ctx.local_cluster_id, "kubernetes.io/metadata.name": name},
                "annotations": {c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION: nm_ref, c.ORIGINAL_NAME_ANNOTATION: local_ns},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }


def _managed_by(namespace: Obj, nm_ref: str) -> bool:
    return (namespace["metadata"].get("annotations") or {}).get(c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION) == nm_ref
