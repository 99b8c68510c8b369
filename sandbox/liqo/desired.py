"""The offloading controller's desiredMapping writes, grouped per NamespaceMap.

Every write of a NamespaceMap costs the API server time in proportion to the map's size (it validates,
diffs the managed fields of and copies the whole object), and one map holds an entry per offloaded
namespace: written once per offloading, a bulk of N offloadings costs N x N. Here a reconcile that has
entries to write hands them, with the rest of its pass (the scheduling label, the event, the status),
to :class:`DesiredWrites`: the entries waiting are written with one merge patch per map, then each
namespace's pass goes on. Each namespace still sees its writes in Liqo's order (finalizer, map, label,
status); only writes of different namespaces are grouped.

The entries wait for others ten times as long as the last group took to write (at most
:data:`MAX_LINGER`), so writing maps takes at most about a tenth of the controller's time however fast
offloadings arrive. While the maps are small (under :data:`GROUP_FROM` entries: tests, demos) nothing
waits: each pass writes its entries at once, as Liqo does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.errors import ApiError
from sandbox.kinds import NAMESPACE_MAPS
from sandbox.liqo.context import OFFLOADING, LiqoContext
from sandbox.runtime import Retry
from sandbox.store import Obj

log = logging.getLogger("sandbox.controller")

# The work-queue name of the grouped writes (one key: the whole group).
DESIRED = "desired-mapping"
MAX_LINGER = 0.25  # seconds a desiredMapping entry waits at most for others to join it
LINGER_FACTOR = 10.0  # the wait, as a multiple of how long the last group took to write
GROUP_FROM = 100  # entries: smaller maps (tests, demos) are written at once, as Liqo does


def linger(cost: float) -> float:
    """How long a write waits for others to join it, from how long the last such write took."""
    return min(MAX_LINGER, LINGER_FACTOR * cost)


# The rest of a namespace's pass once its entries are written, given the errors of its entries.
Then = Callable[[list[ApiError]], None]


@dataclass
class _MapWrites:
    namespace: str  # the NamespaceMap's namespace and name (to patch it even if it vanished meanwhile)
    name: str
    entries: dict[str, str | None] = field(default_factory=dict)  # namespace -> remote name (None: remove)
    size: int = 0  # entries in the map's desiredMapping


def forbidden(ctx: LiqoContext, cluster_id: str, map_name: str, namespace: str, remote: str | None) -> ApiError | None:
    """The error the API server answers Liqo's controller when it may not patch this peer's map (issue 27)."""
    peer = ctx.peers.get(cluster_id)
    if peer is None or peer.namespace_map_writable:
        return None
    verb, to = ("adding", "to") if remote else ("removing", "from")
    return ApiError(
        403,
        "Forbidden",
        f'{verb} namespace "{namespace}" {to} NamespaceMap {map_name}: '
        f'namespacemaps.offloading.liqo.io "{map_name}" is forbidden',
    )


class DesiredWrites:
    """desiredMapping entries waiting to be written, and the passes waiting for them (per namespace:
    the newest pass, which read the newest state, replaces an older one still waiting)."""

    def __init__(self, ctx: LiqoContext) -> None:
        self.ctx = ctx
        self._maps: dict[str, _MapWrites] = {}  # cluster id -> entries waiting
        self._then: dict[str, Then] = {}  # namespace -> the rest of its pass
        self._failures: dict[str, int] = {}  # namespace -> rests that failed in a row (backoff)
        self._last_cost = 0.0
        self.groups = 0  # groups written (tests and the bench read them)
        self.entries = 0  # entries written in them

    def desired(self, cluster_id: str, nm: Obj) -> dict[str, Any]:
        """The map's desiredMapping as it will be once the entries waiting are written."""
        current = (nm.get("spec") or {}).get("desiredMapping") or {}
        waiting = self._maps.get(cluster_id)
        if waiting is None or not waiting.entries:
            return current
        merged = dict(current)
        for namespace, remote in waiting.entries.items():
            if remote is None:
                merged.pop(namespace, None)
            else:
                merged[namespace] = remote
        return merged

    def waiting(self, namespace: str) -> bool:
        """Whether a pass of ``namespace`` waits for its entries: a newer pass waits behind it."""
        return namespace in self._then

    def add(self, cluster_id: str, nm: Obj, namespace: str, remote: str | None) -> None:
        meta = nm["metadata"]
        writes = self._maps.setdefault(cluster_id, _MapWrites(meta["namespace"], meta["name"]))
        writes.entries[namespace] = remote
        writes.size = max(writes.size, len((nm.get("spec") or {}).get("desiredMapping") or {}))

    def then(self, namespace: str, rest: Then) -> None:
        """Run ``rest`` once the entries waiting are written (replacing an older rest of ``namespace``)."""
        self._then[namespace] = rest
        if max((writes.size for writes in self._maps.values()), default=0) < GROUP_FROM:
            self.flush()  # small maps: nothing to gain from waiting, written at once as Liqo does
        else:
            self.ctx.controller.enqueue(DESIRED, "", linger(self._last_cost))

    def flush(self, _: str = "") -> float | None:
        """The reconciler of :data:`DESIRED`: one merge patch per map, then each namespace's pass."""
        maps, rests = self._maps, self._then
        self._maps, self._then = {}, {}
        if self.ctx.faults.controller_is_down():
            return None  # lost with the process; every offloading is reconciled again when it is back
        started = time.thread_time()
        failed: dict[str, list[ApiError]] = {}
        for cluster_id, writes in sorted(maps.items()):
            for namespace, error in self._write(cluster_id, writes).items():
                failed.setdefault(namespace, []).append(error)
        self._last_cost = time.thread_time() - started
        for namespace, rest in rests.items():
            self._finish(namespace, rest, failed.get(namespace, []))
        return None

    def _write(self, cluster_id: str, writes: _MapWrites) -> dict[str, ApiError]:
        """Write one map's entries: one patch, or one per entry when that fails (each its own error)."""
        errors: dict[str, ApiError] = {}
        allowed: dict[str, str | None] = {}
        for namespace, remote in writes.entries.items():
            refused = forbidden(self.ctx, cluster_id, writes.name, namespace, remote)
            if refused is not None:
                errors[namespace] = refused
            else:
                allowed[namespace] = remote
        groups = [allowed] if allowed else []
        while groups:
            group = groups.pop()
            try:
                self.ctx.patch(NAMESPACE_MAPS, writes.namespace, writes.name, {"spec": {"desiredMapping": group}})
            except ApiError as err:
                if len(group) == 1:
                    errors.update(dict.fromkeys(group, err))
                else:
                    groups.extend({namespace: remote} for namespace, remote in group.items())
                continue
            self.groups += 1
            self.entries += len(group)
        return errors

    def _finish(self, namespace: str, rest: Then, errors: list[ApiError]) -> None:
        """Run the rest of a pass; an error requeues the namespace with the controller's backoff."""
        controller = self.ctx.controller
        try:
            rest(errors)
        except Retry as retry:
            failures = self._failures[namespace] = self._failures.get(namespace, 0) + 1
            delay = retry.delay if retry.delay is not None else self._backoff(failures)
            self.ctx.enqueue(OFFLOADING, namespace, delay)
        except Exception as exc:  # noqa: BLE001 - a controller keeps going, like the real ones
            failures = self._failures[namespace] = self._failures.get(namespace, 0) + 1
            log.warning("reconcile %s/%s failed: %s", OFFLOADING, namespace, exc)
            controller.errors = (controller.errors + [((OFFLOADING, namespace), f"{type(exc).__name__}: {exc}")])[-50:]
            self.ctx.enqueue(OFFLOADING, namespace, self._backoff(failures))
        else:
            self._failures.pop(namespace, None)

    def _backoff(self, failures: int) -> float:
        controller = self.ctx.controller
        return float(min(controller.base_backoff * 2 ** (failures - 1), controller.max_backoff))
