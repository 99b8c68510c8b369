"""The namespaces and NamespaceOffloadings of a full refresh, with the offloadings streamed.

A NamespaceOffloading carries two conditions per peer: at 10,000 namespaces / 200 clusters the list
is about 60 MB of JSON and several hundred MB once decoded. The refresh therefore lists the
namespaces whole (small), writes their rows, then reads the offloadings a page at a time and writes
each page's namespaces before the next page is read, so at most one page is held. The namespaces
without an offloading are settled only after the last page (until then, absence proves nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from liqo_rules import constants as liqo
from liqo_rules.spec import FIELD_POD, apply_defaults, local_cluster_id_from
from offloading.models import Cluster, Namespace, SnapshotState
from offloading.models.fleet import ManagedRef, managed_pk
from offloading.snapshot.drift import record_drift, record_label_drift
from offloading.snapshot.store import NOT_OFFLOADED, parse_time, replace_offloading_rows

# Offloadings per LIST page: each carries two conditions per peer (about 300 bytes), so a page is kept
# near 3 MB of JSON: 50 offloadings at 200 peers, 10 at 1,000.
OFFLOADING_PAGE = 50
PAGE_BYTES = 3_000_000
BYTES_PER_PEER = 300


def offloading_page_size(peers: int | None = None, managed: ManagedRef = None) -> int:
    """Offloadings per LIST page for ``peers`` peered clusters (default: the count in the snapshot of
    ``managed``, None: the default cluster)."""
    if peers is None:
        peers = Cluster.objects.filter(managed_id=managed_pk(managed)).count()
    return max(5, min(OFFLOADING_PAGE, PAGE_BYTES // (BYTES_PER_PEER * max(1, peers))))


class NamespaceRefresh:
    """One refresh's namespaces: :meth:`namespaces` first, :meth:`offloadings` per page, then
    :meth:`finish`. Counts what it saw, changed and found drifted, like the whole-list refresh did.
    Reads and writes only the rows of ``managed`` (None: the default cluster)."""

    def __init__(self, now: Any, managed: ManagedRef = None) -> None:
        self.now = now
        self.managed = managed_pk(managed)
        self.baseline = SnapshotState.get(self.managed).last_success_at is None
        self.items: dict[str, dict[str, Any]] = {}  # listed namespaces by name
        self.settled: set[str] = set()  # namespaces whose offloading (or its absence) was handled
        # Labels before this refresh rewrote them, for label drift (decided once the offloading is known).
        self.previous_labels: dict[str, dict[str, str]] = {}
        # Rows written after this refresh began (an apply of ours, or the watcher), as read before this
        # refresh rewrote their labels: their offloading is left to the next refresh.
        self.fresher: set[str] = set()
        self.offloadings = self.changed = self.drift = 0
        self.local_cluster_id = ""

    def namespaces(self, listed: list[dict[str, Any]]) -> None:
        """Write the namespace rows that are new or changed; delete the ones no longer listed."""
        mine = Namespace.objects.filter(managed_id=self.managed)
        existing = {n.name: n for n in mine.defer("offloading_status", "offloading_spec")}
        rows = []
        for item in listed:
            meta = item.get("metadata") or {}
            name = meta.get("name", "")
            self.items[name] = item
            old = existing.get(name)
            if old is not None and old.refreshed_at is not None and old.refreshed_at > self.now:
                self.fresher.add(name)
            row = Namespace(
                managed_id=self.managed,
                name=name,
                labels=meta.get("labels") or {},
                status_phase=(item.get("status") or {}).get("phase", ""),
                created_at=parse_time(meta.get("creationTimestamp")),
                refreshed_at=self.now,
            )
            if old is None or (old.labels, old.status_phase, old.created_at) != (
                row.labels,
                row.status_phase,
                row.created_at,
            ):
                # Only new or changed namespaces are written: a refresh of an unchanged fleet writes
                # nothing. Offloading fields of known namespaces are written per page, where they changed.
                if old is not None:
                    for field_name in NOT_OFFLOADED:
                        setattr(row, field_name, getattr(old, field_name))
                    self.previous_labels[name] = old.labels
                rows.append(row)
        update_fields = ["labels", "status_phase", "created_at", "refreshed_at"]
        with transaction.atomic():
            Namespace.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["managed", "name"],
                update_fields=update_fields,
                batch_size=1000,
            )
            gone = [name for name in existing if name not in self.items]
            for start in range(0, len(gone), 1000):
                mine.filter(name__in=gone[start : start + 1000]).delete()

    def offloadings_page(self, page: list[dict[str, Any]]) -> None:
        """Write the namespaces whose offloading is on this page."""
        observed: dict[str, dict[str, Any] | None] = {}
        for obj in page:
            meta = obj.get("metadata") or {}
            if meta.get("name") != liqo.OFFLOADING_NAME:
                continue
            self.offloadings += 1
            namespace = meta.get("namespace", "")
            if not self.local_cluster_id:
                status = obj.get("status") or {}
                found = local_cluster_id_from(namespace, obj.get("spec") or {}, status.get("remoteNamespaceName", ""))
                self.local_cluster_id = found or ""
            if namespace in self.items and namespace not in self.settled:
                observed[namespace] = obj
        self._settle(observed)

    def finish(self) -> None:
        """After the last page: the listed namespaces that have no offloading."""
        names = [name for name in self.items if name not in self.settled]
        for start in range(0, len(names), 1000):
            self._settle(dict.fromkeys(names[start : start + 1000]))

    def _settle(self, observed: dict[str, dict[str, Any] | None]) -> None:
        """Compare each namespace with its row (read now: the worker or the watcher may have written it
        since the refresh began), record drift, and rewrite the ones whose offloading changed."""
        if not observed:
            return
        self.settled.update(observed)
        rows = Namespace.objects.filter(managed_id=self.managed, name__in=list(observed)).defer("offloading_status")
        changed: dict[str, dict[str, Any] | None] = {}
        for old in _in_order(rows, observed):
            obj = observed[old.name]
            if old.name in self.fresher or (old.refreshed_at is not None and old.refreshed_at > self.now):
                # Why: an apply of ours (or the watcher) wrote this namespace after our LISTs began, so the
                # LIST may predate that write: comparing would record our own change as drift and put
                # the old state back. The next refresh looks at it again.
                continue
            observed_rv = (obj.get("metadata") or {}).get("resourceVersion", "") if obj else ""
            if old.offloading_resource_version != observed_rv:
                changed[old.name] = obj
            if not self.baseline and record_drift(old, obj, self.now):
                self.drift += 1
            if old.name in self.previous_labels:
                old.labels = self.previous_labels[old.name]  # as it was before this refresh
            # The namespace was listed before this page of offloadings: while the pod strategy moved in
            # between, Liqo's own label upkeep is in motion and the pair proves nothing (the next refresh,
            # or the watcher, judges the label on a consistent pair).
            consistent = _pod_strategy(old.offloading_spec if old.offloaded else None) == _pod_strategy(
                (obj or {}).get("spec") if obj else None
            )
            if not self.baseline and consistent and record_label_drift(old, self.items[old.name], obj):
                self.drift += 1
        self.changed += len(changed)
        # The first refresh only learns the state: it has no transitions to report.
        replace_offloading_rows(changed, self.now, history=not self.baseline, managed=self.managed)


def _pod_strategy(spec: dict[str, Any] | None) -> str | None:
    return None if spec is None else apply_defaults(spec).get(FIELD_POD)


def _in_order(rows: Iterable[Namespace], observed: dict[str, Any]) -> list[Namespace]:
    """The rows in the order the namespaces were observed (drift events keep the listing's order)."""
    by_name = {row.name: row for row in rows}
    return [by_name[name] for name in observed if name in by_name]
