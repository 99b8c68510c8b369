"""A namespace followed across the Liqo domain (issue 28): for one local namespace of the default cluster
whose offloading targets peers, the peers that are managed clusters too (``ManagedCluster.liqo_cluster_id``
is the peer's cluster id) are asked, each through its own API (``offloading.cluster.managed``), about the
twin namespace Liqo made there: whether it exists and its phase (Active, Terminating or missing), whose
twin it is, the pods running in it (name, phase, node) and what else is there (ConfigMaps, Secrets and
Services: what Liqo reflected, by name only). Peers that are not managed are only listed: their side is
not visible from here.

The same read answers the remote-name collision check of a proposed offload (:func:`remote_collisions`):
on a managed provider, a namespace already named like the remote name and not this cluster's twin makes
Liqo's NamespaceMap controller fail (``CreationLoopBackOff``, ../shared/docs/liqo-semantics.md b.1).

The providers are read through :mod:`offloading.cluster.remote` (bounded: at once, each call on a short
timeout, the whole waited for ``remote.DEADLINE`` s at most, answers cached a few seconds). Only
:func:`twins` and :func:`remote_collisions` touch the database, before any provider is asked.

The remote name on each peer is the one Liqo reports there (the NamespaceMap's ``currentMapping``), else
the one it asked for (``desiredMapping``), else the offloading's ``status.remoteNamespaceName``, else the
one the mapping strategy gives (``liqo_rules.spec.remote_namespace_name``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from liqo_rules import constants as c
from liqo_rules.spec import mapping_strategy, remote_namespace_name
from offloading.cluster.remote import (
    Readers,
    Reading,
    is_twin_of,
    local_cluster_id,
    managed_providers,
    read_many,
    whose,
)
from offloading.models import ClusterOffloading, MappingEntry, Namespace
from offloading.models.fleet import ManagedRef
from offloading.models.managed import ManagedCluster

UNKNOWN_NAME = "unknown name"  # the remote name cannot be told yet (DefaultName before the local id is known)

# The collision check's verdicts.
FREE = "free"  # no namespace of that name on the provider: Liqo will create it
OURS = "ours"  # it is the twin of this very namespace
SHARED = "shared"  # the twin of another namespace of this cluster: Liqo accepts it, both then share it
TAKEN = "taken"  # a namespace that is not this cluster's twin: Liqo fails with CreationLoopBackOff
UNCHECKED = "unchecked"  # the provider could not be asked


@dataclass(frozen=True)
class Twin:
    """A namespace's twin on one managed provider."""

    cluster_id: str  # the peer's Liqo cluster id
    cluster: str  # the managed cluster's name in this dashboard
    remote_name: str
    local_state: str  # what this cluster's status says of that peer (Ready, CreationLoopBackOff, ...)
    selected: bool
    reading: Reading
    ours: bool  # the namespace there is this namespace's twin
    note: str = ""  # what is odd about it, in words

    @property
    def state(self) -> str:
        return self.reading.state


@dataclass(frozen=True)
class Unmanaged:
    """A peer the namespace is offloaded to that this dashboard does not manage: its side is not visible."""

    cluster_id: str
    remote_name: str
    local_state: str
    selected: bool


@dataclass
class Across:
    """A namespace across the domain: its twins on the managed providers and the other peers."""

    namespace: str
    local_id: str
    offloaded: bool
    twins: list[Twin] = field(default_factory=list)
    unmanaged: list[Unmanaged] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class RemoteCheck:
    """The collision check of a remote name on one managed provider."""

    cluster_id: str
    cluster: str
    remote_name: str
    verdict: str  # FREE, OURS, SHARED, TAKEN, UNCHECKED
    detail: str = ""

    @property
    def fails(self) -> bool:
        return self.verdict == TAKEN

    def message(self) -> str:
        where = f'"{self.remote_name}" on {self.cluster_id} (managed cluster {self.cluster})'
        if self.verdict == TAKEN:
            return (
                f"a namespace {where} already exists and is not this cluster's twin ({self.detail}): Liqo would "
                "fail to create the remote namespace (CreationLoopBackOff); choose another remote name"
            )
        if self.verdict == SHARED:
            return (
                f"{where} is already the twin of this cluster's namespace {self.detail}: Liqo would put both into "
                "that one namespace, and unoffloading either would delete it for both"
            )
        if self.verdict == UNCHECKED:
            return f"{where} could not be checked: {self.detail}"
        if self.verdict == OURS:
            return f"{where} is already this namespace's twin"
        return f"{where} is free"


def _remote_name(namespace: Namespace, entry: MappingEntry | None, local_id: str) -> str:
    if entry is not None and (entry.current_remote or entry.desired):
        return entry.current_remote or entry.desired
    if namespace.remote_namespace_name:
        return namespace.remote_namespace_name
    spec = namespace.offloading_spec or {}
    if mapping_strategy(spec) == c.DEFAULT_NAME and not local_id:
        return ""
    return remote_namespace_name(namespace.name, local_id, spec)


def _note(namespace: str, reading: Reading, local_id: str) -> tuple[bool, str]:
    """(whether it is this namespace's twin, what is odd about it)."""
    if not reading.exists:
        return False, ""
    if not is_twin_of(reading, local_id):
        return (
            False,
            f"not this cluster's twin: {whose(reading, local_id)} (Liqo cannot create the twin under this name)",
        )
    if reading.original_name and reading.original_name != namespace:
        return False, f"the twin of this cluster's namespace {reading.original_name}: both share it"
    return True, ""


def twins(namespace: Namespace, identity: Readers = None) -> Across:
    """``namespace`` across the domain: the peers its offloading selects or still holds a twin on (this
    cluster's snapshot: the offloading's status and the NamespaceMaps), each managed one's twin read from
    its own API, the others listed."""
    started = time.monotonic()
    local_id = local_cluster_id(namespace.managed_id)  # the namespace's own cluster's
    found = Across(namespace.name, local_id, namespace.offloaded)
    states = {
        row.cluster_id: row
        for row in ClusterOffloading.objects.filter(namespace=namespace).filter(Q(selected=True) | ~Q(state=""))
    }
    entries = {
        entry.cluster_id: entry
        for entry in MappingEntry.objects.of(namespace.managed_id).filter(namespace=namespace.name)
    }
    peers = sorted(set(states) | {cid for cid, e in entries.items() if e.desired or e.current_remote})
    providers = managed_providers(local_id, namespace.managed_id)
    asks: list[tuple[ManagedCluster, str]] = []
    pending: list[tuple[str, str, str, bool]] = []
    for cluster_id in peers:
        row, entry = states.get(cluster_id), entries.get(cluster_id)
        local_state = (row.state if row is not None else "") or (entry.current_phase if entry is not None else "")
        selected = bool(row is not None and row.selected) or bool(entry is not None and entry.desired)
        remote = _remote_name(namespace, entry, local_id)
        if cluster_id not in providers:
            found.unmanaged.append(Unmanaged(cluster_id, remote, local_state, selected))
            continue
        pending.append((cluster_id, remote, local_state, selected))
        if remote:
            asks.append((providers[cluster_id], remote))
    readings = iter(read_many(asks, identity))
    for cluster_id, remote, local_state, selected in pending:
        reading = next(readings) if remote else Reading(UNKNOWN_NAME, error="this cluster's Liqo id is not known yet")
        ours, note = _note(namespace.name, reading, local_id)
        found.twins.append(
            Twin(cluster_id, providers[cluster_id].name, remote, local_state, selected, reading, ours, note)
        )
    found.seconds = time.monotonic() - started
    return found


def remote_collisions(
    namespace: str,
    spec: dict[str, Any],
    clusters: Iterable[str],
    *,
    local_id: str | None = None,
    identity: Readers = None,
    own: ManagedRef = None,
) -> list[RemoteCheck]:
    """The remote name ``spec`` gives ``namespace``, checked on each of ``clusters`` (the peers the offload
    would select) that is a managed cluster: whether a namespace of that name already exists there and
    is not this namespace's twin (TAKEN: Liqo would fail with CreationLoopBackOff). Peers that are not
    managed are not checked (their side is not visible); none when the remote name is not known yet
    (DefaultName before this cluster's Liqo id is known). ``own``: the namespace's managed cluster (None:
    the default one); from another one, the default cluster is a managed provider too."""
    local_id = local_cluster_id(own) if local_id is None else local_id
    if mapping_strategy(spec) == c.DEFAULT_NAME and not local_id:
        return []
    remote = remote_namespace_name(namespace, local_id, spec)
    if not remote:
        return []
    providers = managed_providers(local_id, own)
    # By the Liqo id they were found under: the default cluster's is discovered, not stored on its row.
    targets = [(cid, providers[cid]) for cid in sorted(set(clusters)) if cid in providers]
    readings = read_many([(cluster, remote) for _cid, cluster in targets], identity, full=False)
    return [
        _verdict(namespace, cid, cluster, remote, reading, local_id)
        for (cid, cluster), reading in zip(targets, readings, strict=True)
    ]


def _verdict(
    namespace: str, cluster_id: str, cluster: ManagedCluster, remote: str, reading: Reading, local_id: str
) -> RemoteCheck:
    def check(verdict: str, detail: str = "") -> RemoteCheck:
        return RemoteCheck(cluster_id, cluster.name, remote, verdict, detail)

    if not reading.answered:
        return check(UNCHECKED, f"{reading.state}: {reading.error}" if reading.error else reading.state)
    if not reading.exists:
        return check(FREE)
    if not is_twin_of(reading, local_id):
        return check(TAKEN, whose(reading, local_id))
    if reading.original_name and reading.original_name != namespace:
        return check(SHARED, reading.original_name)
    return check(OURS)
