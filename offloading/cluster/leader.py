"""Leader election with a coordination.k8s.io Lease, the way client-go's leaderelection does it: only
one watcher writes the snapshot, and another one takes over within the lease duration when it dies.

Expiry is judged by when *this* process last saw the lease change (a monotonic clock), not by the
renewTime written by another machine, so clock skew between replicas does not matter.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from offloading.cluster import kube

log = logging.getLogger(__name__)


def _micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    name: str
    namespace: str
    identity: str
    lease_seconds: int = 15
    clock: Any = time.monotonic
    # What this process last saw of the lease: (holder, renewTime) and when it saw it change.
    _observed: tuple[str, str] = ("", "")
    _observed_at: float = 0.0
    _last_renewal: float | None = field(default=None)

    def _lease(self, holder_spec: dict[str, Any], resource_version: str | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": holder_spec}

    def try_acquire_or_renew(self) -> bool:
        """One round: take the lease when it is free or expired, renew it when it is ours. Returns
        whether this process leads now. An API error counts as a failed renewal: a leader that could
        not renew for two thirds of the lease duration steps down before anyone can take over."""
        try:
            leading = self._round()
        except kube.KubeError as exc:
            log.warning("leader election for %s: %s", self.name, exc.message)
            # The API server did not say who leads: keep leading until the renew deadline.
            deadline = self._last_renewal is not None and self.clock() - self._last_renewal < self.lease_seconds * 2 / 3
            if not deadline:
                self._last_renewal = None
            return bool(deadline)
        self._last_renewal = self.clock() if leading else None
        return leading

    def _round(self) -> bool:
        now_wall = datetime.now(UTC)
        lease = kube.get_lease(self.namespace, self.name)
        mine = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": _micro_time(now_wall),
            "renewTime": _micro_time(now_wall),
            "leaseTransitions": 0,
        }
        if lease is None:
            try:
                kube.create_lease(self.namespace, self._lease(mine, None))
            except kube.KubeError as exc:
                if exc.kind in ("exists", "conflict"):
                    return False
                raise
            log.info("leader election: %s leads %s (new lease)", self.identity, self.name)
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        observed = (holder, str(spec.get("renewTime") or ""))
        if observed != self._observed:
            self._observed, self._observed_at = observed, self.clock()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        expired = self.clock() - self._observed_at > duration
        if holder and holder != self.identity and not expired:
            return False
        if holder == self.identity:
            mine["acquireTime"] = spec.get("acquireTime") or mine["acquireTime"]
            mine["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            mine["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        version = (lease.get("metadata") or {}).get("resourceVersion")
        try:
            kube.replace_lease(self.namespace, self._lease(mine, version))
        except kube.KubeError as exc:
            if exc.kind == "conflict":
                return False  # someone else renewed or took it first
            raise
        if holder != self.identity:
            log.info("leader election: %s leads %s (took over from %r)", self.identity, self.name, holder)
        return True
