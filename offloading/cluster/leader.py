"""Leader election with a coordination.k8s.io Lease, the way client-go's leaderelection does it: only
one watcher writes the snapshot, and another one takes over within the lease duration when it dies.

Expiry is judged by when *this* process last saw the lease change (a monotonic clock), not by the
renewTime written by another machine, so clock skew between replicas does not matter.

The watcher's shares of several managed clusters (``offloading.cluster.shares``) run one elector per
cluster lease: ``look`` reads a lease without writing it, ``try_acquire_or_renew`` may be given what
``look`` read (no second read), and ``release`` gives a lease up at once, as client-go's
ReleaseOnCancel does.
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


@dataclass(frozen=True)
class Look:
    """What one read of a lease said: its holder ("" when free or released), whether it expired by this
    process's clock, and the lease itself (None: there is none yet)."""

    holder: str
    expired: bool
    lease: dict[str, Any] | None

    @property
    def free(self) -> bool:
        return not self.holder or self.expired


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

    def _note(self, lease: dict[str, Any]) -> Look:
        """Note the lease's (holder, renewTime) and when this process first saw it so."""
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        observed = (holder, str(spec.get("renewTime") or ""))
        if observed != self._observed:
            self._observed, self._observed_at = observed, self.clock()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        return Look(holder, self.clock() - self._observed_at > duration, lease)

    def look(self) -> Look:
        """Read the lease without writing it (raises KubeError)."""
        lease = kube.get_lease(self.namespace, self.name, timeout=self.request_timeout)
        return Look("", False, None) if lease is None else self._note(lease)

    @property
    def request_timeout(self) -> float:
        """Each lease request's timeout: a third of the lease, so that a hung request leaves time to renew
        before the lease runs out (the API's default timeout is as long as a whole default lease)."""
        return max(1.0, self.lease_seconds / 3)

    def holds_now(self) -> bool:
        """Whether this process renewed the lease within its renew deadline (two thirds of the lease):
        until then no other process can have taken it, whatever the clocks."""
        return self._last_renewal is not None and self.clock() - self._last_renewal < self.lease_seconds * 2 / 3

    @property
    def leading(self) -> bool:
        """Whether the last round left this process holding the lease."""
        return self._last_renewal is not None

    def try_acquire_or_renew(self, seen: Look | None = None) -> bool:
        """One round: take the lease when it is free or expired, renew it when it is ours. Returns
        whether this process leads now. An API error counts as a failed renewal: a leader that could
        not renew for two thirds of the lease duration steps down before anyone can take over.
        ``seen``: what ``look`` just read, instead of reading the lease again."""
        try:
            leading = self._round(seen)
        except kube.KubeError as exc:
            log.warning("leader election for %s: %s", self.name, exc.message)
            # The API server did not say who leads: keep leading until the renew deadline.
            deadline = self._last_renewal is not None and self.clock() - self._last_renewal < self.lease_seconds * 2 / 3
            if not deadline:
                self._last_renewal = None
            return bool(deadline)
        self._last_renewal = self.clock() if leading else None
        return leading

    def _round(self, seen: Look | None = None) -> bool:
        now_wall = datetime.now(UTC)
        lease = kube.get_lease(self.namespace, self.name, timeout=self.request_timeout) if seen is None else seen.lease
        mine = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": _micro_time(now_wall),
            "renewTime": _micro_time(now_wall),
            "leaseTransitions": 0,
        }
        if lease is None:
            try:
                kube.create_lease(self.namespace, self._lease(mine, None), timeout=self.request_timeout)
            except kube.KubeError as exc:
                if exc.kind in ("exists", "conflict"):
                    return False
                raise
            log.info("leader election: %s leads %s (new lease)", self.identity, self.name)
            return True
        spec = lease.get("spec") or {}
        noted = self._note(lease) if seen is None else seen
        holder, expired = noted.holder, noted.expired
        if holder and holder != self.identity and not expired:
            return False
        if holder == self.identity:
            mine["acquireTime"] = spec.get("acquireTime") or mine["acquireTime"]
            mine["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            mine["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        version = (lease.get("metadata") or {}).get("resourceVersion")
        try:
            kube.replace_lease(self.namespace, self._lease(mine, version), timeout=self.request_timeout)
        except kube.KubeError as exc:
            if exc.kind == "conflict":
                return False  # someone else renewed or took it first
            raise
        if holder != self.identity:
            log.info("leader election: %s leads %s (took over from %r)", self.identity, self.name, holder)
        return True

    def release(self) -> bool:
        """Give the lease up when this process holds it, as client-go's ReleaseOnCancel does: no holder, a
        duration of one second, the transitions kept; whoever looks next may take it at once. Returns
        whether it was released; an API error is logged (the lease then expires as after a crash)."""
        self._last_renewal = None
        try:
            lease = kube.get_lease(self.namespace, self.name, timeout=self.request_timeout)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.identity:
                return False
            now = _micro_time(datetime.now(UTC))
            released = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": int(spec.get("leaseTransitions") or 0),
            }
            version = (lease.get("metadata") or {}).get("resourceVersion")
            kube.replace_lease(self.namespace, self._lease(released, version), timeout=self.request_timeout)
        except kube.KubeError as exc:
            log.warning("leader election: %s could not release %s: %s", self.identity, self.name, exc.message)
            return False
        log.info("leader election: %s released %s", self.identity, self.name)
        return True
