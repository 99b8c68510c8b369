"""Namespace termination (kube-controller-manager's namespace controller): delete what a terminating
namespace still holds, then finalize it."""

from __future__ import annotations

from sandbox.errors import ApiError
from sandbox.kinds import NAMESPACES, STORED_KINDS
from sandbox.liqo.context import LiqoContext


class NamespaceController:
    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx

    def reconcile(self, name: str) -> float | None:
        store, server = self.ctx.store, self.ctx.server
        ns = store.get(NAMESPACES, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        namespaced = [kind for kind in STORED_KINDS if kind.namespaced]
        remaining = 0
        for kind in namespaced:
            for obj in store.items(kind, name):
                remaining += 1
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    server.delete(kind, name, obj["metadata"]["name"])
                except ApiError as err:
                    if err.code != 404:
                        raise
        if remaining and any(store.items(kind, name) for kind in namespaced):
            return None  # deletions of the remaining objects re-enqueue this namespace
        server.finalize_namespace(name)
        return None
