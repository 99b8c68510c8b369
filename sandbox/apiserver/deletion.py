"""DELETE as kube-apiserver does it: uid and resourceVersion preconditions; an object with finalizers (and
every namespace) is only marked, with deletionTimestamp and a bumped generation, until its finalizers are
gone; the namespace controller's last step removes a finalized namespace."""

from __future__ import annotations

from sandbox import errors
from sandbox.apicommon import Result, now_iso
from sandbox.kinds import NAMESPACES, Kind
from sandbox.objects import Obj, clone
from sandbox.store import Store


class Deleter:
    """Delete with preconditions, finalizers and deletionTimestamp."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def delete(
        self, kind: Kind, namespace: str, name: str, *, options: Obj | None = None, dry_run: bool = False
    ) -> Result:
        options = options or {}
        with self.store.lock:
            current = self.store.must_get(kind, namespace, name)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != current["metadata"].get("uid"):
                raise errors.conflict(
                    kind,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in "
                    f"object meta: {current['metadata'].get('uid')}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise errors.conflict(
                    kind,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{current['metadata']['resourceVersion']}",
                )
            finalizers = current["metadata"].get("finalizers") or []
            if kind is NAMESPACES or finalizers:
                if current["metadata"].get("deletionTimestamp"):
                    return Result(current)
                new = clone(current)
                new["metadata"]["deletionTimestamp"] = now_iso()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if kind.generation:
                    # As kube-apiserver: setting deletionTimestamp bumps the generation, so a write
                    # conditional on the generation someone saw fails on an object being deleted.
                    new["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
                if kind is NAMESPACES:
                    new["status"] = dict(new.get("status") or {}, phase="Terminating")
                if dry_run:
                    return Result(new)
                return Result(self.store.replace(kind, new, current["metadata"]["resourceVersion"]))
            if dry_run:
                return Result(current)
            return Result(self.store.remove(kind, namespace, name))

    def finalize_namespace(self, name: str) -> None:
        """The namespace controller's last step: drop the `kubernetes` finalizer and the namespace."""
        with self.store.lock:
            current = self.store.get(NAMESPACES, "", name)
            if (
                current is not None
                and current["metadata"].get("deletionTimestamp")
                and not current["metadata"].get("finalizers")
            ):
                self.store.remove(NAMESPACES, "", name)
