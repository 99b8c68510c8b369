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

Bounded, as a page's reads must be: each call has a short timeout (``READ_TIMEOUT``), the providers are
asked at once (``THREADS``), and an answer is waited for at most ``DEADLINE`` s: a provider that has not
answered by then is shown unreachable while the others are shown as they are. Each provider's answer is
kept ``CACHE_SECONDS`` in Django's cache (keyed by the cluster, the remote name and who asks), so a page
reload does not ask the clusters again (one past the deadline is cached as unreachable). Only :func:`twins` and :func:`remote_collisions` touch the database, before any thread starts.

The remote name on each peer is the one Liqo reports there (the NamespaceMap's ``currentMapping``), else
the one it asked for (``desiredMapping``), else the offloading's ``status.remoteNamespaceName``, else the
one the mapping strategy gives (``liqo_rules.spec.remote_namespace_name``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ALL_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from django.core.cache import cache
from django.db.models import Q
from kubernetes import client

from liqo_rules import constants as c
from liqo_rules.spec import mapping_strategy, remote_namespace_name
from offloading.cluster import kube
from offloading.cluster.errors import KubeError
from offloading.cluster.identity import Identity, impersonation_headers
from offloading.cluster.managed import api_client_for
from offloading.models import ClusterOffloading, MappingEntry, Namespace, SnapshotState
from offloading.models.fleet import ManagedRef, is_default
from offloading.models.managed import ManagedCluster

READ_TIMEOUT = 1.5  # seconds per call to a provider (a page's read, like the dry-run's timeout)
DEADLINE = 3.0  # seconds the page waits for all providers together
CACHE_SECONDS = 5  # how long one provider's answer is reused
THREADS = 8  # providers asked at once
POD_LIMIT = 100  # pods read from a twin
OBJECT_LIMIT = 50  # objects of each reflected kind read from a twin
REFLECTED_KINDS = ("configmaps", "secrets", "services")

# What a provider's API says of a remote namespace.
ACTIVE = "Active"
TERMINATING = "Terminating"
MISSING = "missing"
UNREACHABLE = "unreachable"  # no answer (refused connection, dropped, timed out, past the deadline)
REFUSED = "refused"  # the provider's API server answered 401/403
FAILED = "failed"  # another error
UNKNOWN_NAME = "unknown name"  # the remote name cannot be told yet (DefaultName before the local id is known)

# The collision check's verdicts.
FREE = "free"  # no namespace of that name on the provider: Liqo will create it
OURS = "ours"  # it is the twin of this very namespace
SHARED = "shared"  # the twin of another namespace of this cluster: Liqo accepts it, both then share it
TAKEN = "taken"  # a namespace that is not this cluster's twin: Liqo fails with CreationLoopBackOff
UNCHECKED = "unchecked"  # the provider could not be asked

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TwinPod:
    name: str
    phase: str
    node: str


@dataclass(frozen=True)
class Objects:
    """The objects of one kind in a twin (names only: a Secret's data is never kept)."""

    kind: str
    names: tuple[str, ...] = ()
    truncated: bool = False
    error: str = ""


@dataclass(frozen=True)
class Reading:
    """What one provider's API said about one namespace name, when it was asked."""

    state: str  # ACTIVE, TERMINATING, MISSING, UNREACHABLE, REFUSED, FAILED
    owner: str = ""  # the consumer cluster whose twin it is (label liqo.io/remote-cluster-id), "" if none
    managed_by: str = ""  # annotation liqo.io/managed-by-namespace-map ("" on a namespace Liqo did not make)
    original_name: str = ""  # annotation liqo.io/original-name: the consumer's namespace
    pods: tuple[TwinPod, ...] = ()
    pods_truncated: bool = False
    objects: tuple[Objects, ...] = ()
    error: str = ""
    seconds: float = 0.0

    @property
    def answered(self) -> bool:
        return self.state in (ACTIVE, TERMINATING, MISSING)

    @property
    def exists(self) -> bool:
        return self.state in (ACTIVE, TERMINATING)


def is_twin_of(reading: Reading, local_id: str) -> bool:
    """Whether the namespace read is a twin made by this cluster's NamespaceMap (of any of its namespaces):
    Liqo's controller marks it with the consumer's id and the NamespaceMap that manages it
    (``<tenant namespace of the consumer>/<map>``)."""
    if not reading.exists or not reading.managed_by or not local_id:
        return False
    tenant = reading.managed_by.split("/", 1)[0]
    return reading.owner == local_id or tenant == f"{c.TENANT_NAMESPACE_PREFIX}{local_id}"


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


# -- reading a provider -------------------------------------------------------------------------------------
def _headers(identity: Identity | None) -> dict[str, Any]:
    """The impersonation headers for ``identity`` only (never an enclosing ``acting_as``'s: the providers
    are read on other threads, as the identity the caller names)."""
    return impersonation_headers(identity) if identity is not None else {}


def _read(method: Any, *args: Any, identity: Identity | None, **kwargs: Any) -> dict[str, Any]:
    """One read as ``identity``, its JSON body decoded; every failure a KubeError."""
    return kube.read_object(method, *args, timeout=READ_TIMEOUT, **_headers(identity), **kwargs)


def _failure(exc: KubeError, started: float) -> Reading:
    if exc.unreachable:
        state = UNREACHABLE
    elif exc.status in (401, 403):
        state = REFUSED
    else:
        state = FAILED
    return Reading(state, error=str(exc)[:500], seconds=time.monotonic() - started)


def _namespace_reading(body: dict[str, Any]) -> Reading:
    meta = body.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    phase = str((body.get("status") or {}).get("phase") or "")
    state = TERMINATING if meta.get("deletionTimestamp") or phase == TERMINATING else ACTIVE
    return Reading(
        state,
        owner=str(labels.get(c.REMOTE_CLUSTER_ID_LABEL) or ""),
        managed_by=str(annotations.get(c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION) or ""),
        original_name=str(annotations.get(c.ORIGINAL_NAME_ANNOTATION) or ""),
    )


def _pods(core: client.CoreV1Api, name: str, identity: Identity | None) -> tuple[tuple[TwinPod, ...], bool]:
    page = _read(core.list_namespaced_pod, name, identity=identity, limit=POD_LIMIT)
    pods = tuple(
        sorted(
            (
                TwinPod(
                    str((pod.get("metadata") or {}).get("name") or ""),
                    str((pod.get("status") or {}).get("phase") or "Unknown"),
                    str((pod.get("spec") or {}).get("nodeName") or ""),
                )
                for pod in page.get("items") or []
            ),
            key=lambda pod: pod.name,
        )
    )
    return pods, bool((page.get("metadata") or {}).get("continue"))


def _objects(core: client.CoreV1Api, kind: str, name: str, identity: Identity | None) -> Objects:
    methods = {
        "configmaps": core.list_namespaced_config_map,
        "secrets": core.list_namespaced_secret,
        "services": core.list_namespaced_service,
    }
    try:
        page = _read(methods[kind], name, identity=identity, limit=OBJECT_LIMIT)
    except KubeError as exc:
        if exc.unreachable:
            raise
        return Objects(kind, error=str(exc)[:200])
    names = sorted(str((item.get("metadata") or {}).get("name") or "") for item in page.get("items") or [])
    return Objects(kind, tuple(names), bool((page.get("metadata") or {}).get("continue")))


def read_remote(cluster: ManagedCluster, name: str, identity: Identity | None = None, *, full: bool = True) -> Reading:
    """Ask ``cluster``'s API about the namespace ``name`` (``full``: its pods and objects too), as
    ``identity`` when given. No database access: safe in a thread. Never raises for the cluster's sake."""
    started = time.monotonic()
    try:
        core = client.CoreV1Api(api_client_for(cluster))
        try:
            reading = _namespace_reading(_read(core.read_namespace, name, identity=identity))
        except KubeError as exc:
            if exc.kind == "not_found":
                return Reading(MISSING, seconds=time.monotonic() - started)
            raise
        if not full:
            return replace(reading, seconds=time.monotonic() - started)
        pods, more = _pods(core, name, identity)
        objects = tuple(_objects(core, kind, name, identity) for kind in REFLECTED_KINDS)
        return replace(reading, pods=pods, pods_truncated=more, objects=objects, seconds=time.monotonic() - started)
    except KubeError as exc:
        return _failure(exc, started)
    except Exception as exc:  # noqa: BLE001 - one provider's surprise must not hide the others
        log.exception("reading namespace %s in managed cluster %s failed", name, cluster.name)
        return Reading(FAILED, error=f"unexpected error: {exc!r}"[:500], seconds=time.monotonic() - started)


def _cache_key(cluster: ManagedCluster, name: str, identity: Identity | None, full: bool) -> str:
    who = [identity.user, *identity.groups] if identity is not None else []
    parts = json.dumps([cluster.pk, cluster.api_server_url, cluster.context, name, who, full])
    return "liqo-dash:twin:" + hashlib.sha256(parts.encode()).hexdigest()


# As whom each managed cluster is read: one identity for all (None: the dashboard), or a function of the
# cluster (each its own impersonation and groups: access.impersonation.identity_per_cluster).
Readers: TypeAlias = Identity | Callable[[ManagedCluster], Identity | None] | None


def _reader(identity: Readers, cluster: ManagedCluster) -> Identity | None:
    return identity(cluster) if callable(identity) else identity


def read_many(asks: list[tuple[ManagedCluster, str]], identity: Readers = None, *, full: bool = True) -> list[Reading]:
    """Each (cluster, namespace name) read at once, or taken from the cache, as ``identity`` (a function:
    as it names each cluster's reader, asked here, not in the threads); one that has not answered within
    ``DEADLINE`` is UNREACHABLE. Every answer, a late one too, is cached ``CACHE_SECONDS``: a reload
    within that time asks no cluster, not even one that hangs. The cache is used from the calling thread
    only (the threads only talk to the API servers)."""
    if not asks:
        return []
    readers = [_reader(identity, cluster) for cluster, _ in asks]
    keys = [_cache_key(cluster, name, readers[i], full) for i, (cluster, name) in enumerate(asks)]
    cached = cache.get_many(keys)
    results: dict[int, Reading] = {i: cached[key] for i, key in enumerate(keys) if isinstance(cached.get(key), Reading)}
    todo = [i for i in range(len(asks)) if i not in results]
    if todo:
        pool = ThreadPoolExecutor(max_workers=min(THREADS, len(todo)), thread_name_prefix="liqo-dash-twins")
        try:
            futures = {i: pool.submit(read_remote, asks[i][0], asks[i][1], readers[i], full=full) for i in todo}
            wait(futures.values(), timeout=DEADLINE, return_when=ALL_COMPLETED)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a read past the deadline ends on its own timeouts
        late = Reading(UNREACHABLE, error=f"no answer within {DEADLINE:g} s", seconds=DEADLINE)
        fresh = {i: f.result() if f.done() and not f.cancelled() else late for i, f in futures.items()}
        cache.set_many({keys[i]: reading for i, reading in fresh.items()}, CACHE_SECONDS)
        results.update(fresh)
    return [results[i] for i in range(len(asks))]


# -- the database side ----------------------------------------------------------------------------------------
def local_cluster_id(managed: ManagedRef = None) -> str:
    """The Liqo id of ``managed`` (None: the default cluster): configured for the default, else the one
    its snapshot's refresh discovered."""
    return SnapshotState.local_id_of(managed)


def managed_providers(local_id: str, own: ManagedRef = None) -> dict[str, ManagedCluster]:
    """The managed clusters by their Liqo cluster id, but the one of ``local_id``: the others by the id
    discovery named; the default cluster too (by its own id, configured or discovered) when ``own``, the
    namespace's cluster, is another one (None: the default's, asked of no other)."""
    found: dict[str, ManagedCluster] = {}
    from_default = own is not None and not is_default(own)
    for cluster in ManagedCluster.objects.order_by("-is_default", "name"):
        if cluster.is_default and not from_default:
            continue
        cluster_id = cluster.liqo_cluster_id or (local_cluster_id(cluster) if cluster.is_default else "")
        if cluster_id and cluster_id != local_id:
            found.setdefault(cluster_id, cluster)
    return found


def _remote_name(namespace: Namespace, entry: MappingEntry | None, local_id: str) -> str:
    if entry is not None and (entry.current_remote or entry.desired):
        return entry.current_remote or entry.desired
    if namespace.remote_namespace_name:
        return namespace.remote_namespace_name
    spec = namespace.offloading_spec or {}
    if mapping_strategy(spec) == c.DEFAULT_NAME and not local_id:
        return ""
    return remote_namespace_name(namespace.name, local_id, spec)


def _whose(reading: Reading, local_id: str) -> str:
    """Whose a namespace is that is not this cluster's twin, in words."""
    if reading.owner and reading.owner != local_id and reading.managed_by:
        return f"the twin of a namespace of cluster {reading.owner}"
    if reading.owner == local_id:
        return "labelled for this cluster, but not managed by its NamespaceMap"
    return "a namespace of its own, not made by Liqo for this cluster"


def _note(namespace: str, reading: Reading, local_id: str) -> tuple[bool, str]:
    """(whether it is this namespace's twin, what is odd about it)."""
    if not reading.exists:
        return False, ""
    if not is_twin_of(reading, local_id):
        return (
            False,
            f"not this cluster's twin: {_whose(reading, local_id)} (Liqo cannot create the twin under this name)",
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
        return check(TAKEN, _whose(reading, local_id))
    if reading.original_name and reading.original_name != namespace:
        return check(SHARED, reading.original_name)
    return check(OURS)
