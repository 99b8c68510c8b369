"""What a live region depends on and the counters its poll reads (docs/live-pages.md): the kinds of data
each region shows, their ``LiveVersion`` counters (global, or one managed cluster's ``kind@<managed pk>``)
read in one indexed statement, and the version string an ETag is made of. offloading.views.live answers
the polls from them; offloading.middleware.LivePollMiddleware reads them before the session middleware."""

from __future__ import annotations

import functools

from django.db import connection
from django.http import HttpRequest

from offloading.models import LiveVersion, ManagedCluster, livetriggers
from offloading.models.fleet import current_managed

# Every kind of data a live region may show (offloading.models.livetriggers counts the writes to its tables).
KINDS: tuple[str, ...] = (
    "access",  # access.Scope, the users' groups: the controls a user may use
    "alerts",  # Alert: the overview's notifications line
    "audit",  # AuditEvent
    "bulk",  # BulkRequest
    "changes",  # ChangeRequest
    "clusters",  # Cluster
    "events",  # KubeEvent
    "governance",  # Approval, Schedule: a change's approval and when it applies
    "namespaces",  # Namespace
    "nodes",  # VirtualNode
    "mappings",  # PeerNamespaceMap, MappingEntry: Liqo's NamespaceMaps
    "offloadings",  # ClusterOffloading
    "pods",  # Pod
    "resources",  # LiqoResource
    "snapshot",  # SnapshotState: only its last_error and local_cluster_id (the refresh times tick)
    "transitions",  # StatusTransition
)
_EVERY_PAGE = ("access", "snapshot")
# Every kind but these also has a counter per managed cluster, "kind@<managed pk>" (livetriggers.PER_CLUSTER):
# a region of one cluster's page (under /m/<name>/, or the default cluster's on the paths without it) polls
# its cluster's counters, so that a write in one cluster does not re-render the pages of another; these
# rows name no cluster, their kinds have only the global counter.
GLOBAL_KINDS: tuple[str, ...] = ("access", "governance")
# Regions across the managed clusters: they poll the kinds' global counters. The domain map draws every
# managed cluster (a cluster's own path its neighbourhood, with its providers' counts); the fleet-wide
# namespace and change lists and the managed clusters' list do not poll.
FLEET_REGIONS: frozenset[str] = frozenset({"domain_map"})
CLUSTER_KEY = "@"  # in ``versions``' answer: the primary key of the cluster it was asked by name
# The counters under which offloading.middleware remembers who sends a poll (livetriggers.IDENTITY_TABLES
# and the "access" tables): never in an ETag.
IDENTITY: tuple[str, ...] = ("access", "sessions")

# What each live region (by URL name) shows; a region not listed depends on every kind.
# A change's approval and schedule ("governance") are shown wherever its state is.
REGIONS: dict[str, tuple[str, ...]] = {
    "home": ("alerts", "changes", "clusters", "events", "governance", "namespaces", "offloadings", "pods", "resources"),
    "namespace_list": ("changes", "events", "governance", "namespaces", "offloadings", "pods"),
    "fleet_matrix": ("clusters", "namespaces", "offloadings"),
    "cluster_list": ("clusters", "nodes", "offloadings"),
    "cluster_detail": ("clusters", "events", "namespaces", "nodes", "offloadings", "pods", "resources"),
    "audit_list": ("audit", "bulk", "changes", "governance"),
    "namespace_status": ("changes", "governance", "mappings", "namespaces", "offloadings"),
    "change_status": ("changes", "events", "governance", "mappings", "namespaces", "offloadings"),
    "bulk_progress": ("bulk", "changes", "governance"),
    "domain_map": ("clusters", "namespaces", "nodes", "offloadings"),
}


def versions(
    kinds: tuple[str, ...] = KINDS, *, cluster: str | None = None, scoped: tuple[str, ...] = ()
) -> dict[str, int]:
    """The counter of each kind (a global kind, or one cluster's ``kind@<pk>``): one indexed read, whatever
    the size of the fleet. A kind without a row (a database emptied by ``flush``, a cluster not written
    yet) counts 0. With ``cluster`` (a managed cluster's name, as a path under /m/<name>/ gives it), the
    same read also finds that cluster's primary key (under ``CLUSTER_KEY``; absent when no cluster has
    that name) and the counters of ``scoped`` (kinds) in it, as ``kind@<pk>``: LivePollMiddleware knows
    only the name, and a poll costs no read more for it."""
    # A plain cursor: every poll reads it, and the queryset's own work cost several times the read.
    table, kind_column, version_column, managed, pk, name = _live_columns()
    parts, params = [], []
    if kinds:
        marks = ", ".join(["%s"] * len(kinds))
        parts.append(f"SELECT {kind_column}, {version_column} FROM {table} WHERE {kind_column} IN ({marks})")
        params += list(kinds)
    if cluster is not None:
        parts.append(f"SELECT '{CLUSTER_KEY}', {pk} FROM {managed} WHERE {name} = %s")
        params.append(cluster)
        if scoped:
            marks = ", ".join([f"CAST(%s AS TEXT) || CAST(m.{pk} AS TEXT)"] * len(scoped))
            parts.append(
                f"SELECT v.{kind_column}, v.{version_column} FROM {managed} m "
                f"JOIN {table} v ON v.{kind_column} IN ({marks}) WHERE m.{name} = %s"
            )
            params += [f"{kind}@" for kind in scoped] + [cluster]
    if not parts:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        found = {str(kind): int(value) for kind, value in cursor.fetchall()}
    counters = {kind: found.get(kind, 0) for kind in kinds}
    if CLUSTER_KEY in found:
        counters[CLUSTER_KEY] = found[CLUSTER_KEY]
        for kind in scoped:
            key = livetriggers.cluster_kind(kind, found[CLUSTER_KEY])
            counters[key] = found.get(key, 0)
    return counters


@functools.cache
def _live_columns() -> tuple[str, str, str, str, str, str]:
    quote = connection.ops.quote_name
    meta, managed = LiveVersion._meta, ManagedCluster._meta
    return (
        quote(meta.db_table),
        quote(str(meta.get_field("kind").column)),
        quote(str(meta.get_field("version").column)),
        quote(managed.db_table),
        quote(str(managed.pk.column)),
        quote(str(managed.get_field("name").column)),
    )


def region_kinds(url_name: str | None) -> tuple[str, ...]:
    """The kinds a live region depends on: what it shows, plus what every page shows."""
    shown = REGIONS.get(url_name or "")
    return KINDS if shown is None else tuple(sorted({*shown, *_EVERY_PAGE}))


def poll_kinds(url_name: str | None, managed: int | None) -> tuple[str, ...]:
    """The counters a poll of region ``url_name`` reads: its kinds' in the managed cluster ``managed`` (its
    primary key; None, or a region across the fleet: the global counters), the global-only kinds' as they
    are."""
    kinds = region_kinds(url_name)
    if managed is None or url_name in FLEET_REGIONS:
        return kinds
    return tuple(kind if kind in GLOBAL_KINDS else livetriggers.cluster_kind(kind, managed) for kind in kinds)


def managed_of(request: HttpRequest, url_name: str | None) -> int | None:
    """The managed cluster whose counters a poll of ``url_name`` reads: the request's (the one its path
    names, or the default: no query, offloading.models.fleet memoises it); None for a region across the
    fleet."""
    return None if url_name in FLEET_REGIONS else current_managed(request)


def early_counters(
    url_name: str | None, cluster: str | None, also: tuple[str, ...]
) -> tuple[dict[str, int], int | None] | None:
    """For LivePollMiddleware, in one read: the counters of the region ``url_name`` (None: the badge, no
    region) and of ``also`` (global kinds), in the managed cluster the polled path names (``cluster``: its
    name under /m/<name>/; None: the default cluster's paths), and that cluster's primary key (None on the
    default cluster's paths for the badge and the regions across the fleet). None: no managed cluster has
    that name (the view answers the 404)."""
    kinds = region_kinds(url_name) if url_name is not None else ()
    if cluster is None:
        managed = None if url_name is None or url_name in FLEET_REGIONS else current_managed()
        wanted = poll_kinds(url_name, managed) if url_name is not None else ()
        return versions(tuple(sorted({*wanted, *also}))), managed
    fleet = url_name is None or url_name in FLEET_REGIONS
    scoped = () if fleet else tuple(kind for kind in kinds if kind not in GLOBAL_KINDS)
    plain = tuple(sorted({*also, *(kind for kind in kinds if kind not in scoped)}))
    counters = versions(plain, cluster=cluster, scoped=scoped)
    managed = counters.get(CLUSTER_KEY)
    return None if managed is None else (counters, managed)


def data_version(kinds: tuple[str, ...] = KINDS) -> str:
    """Changes whenever anything of ``kinds`` may have changed (every kind by default): snapshot rows
    written, status transitions, changes moving, audit events, the snapshot's error or cluster id.
    It never repeats: each counter only grows."""
    return version_of(versions(kinds), kinds)


def version_of(counters: dict[str, int], kinds: tuple[str, ...]) -> str:
    """``data_version(kinds)`` from counters already read (a superset of ``kinds``)."""
    return ".".join(f"{kind}={counters[kind]}" for kind in kinds)
