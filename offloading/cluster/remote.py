"""Reading a managed provider's API about one namespace name (issue 28): whether a namespace of that name
exists there and its phase (Active, Terminating or missing), whose twin it is (its Liqo label and
annotations), and, for a full read, the pods running in it (name, phase, node) and what else is there
(ConfigMaps, Secrets and Services: what Liqo reflected, by name only). Used by
:mod:`offloading.cluster.twins` both to follow a namespace across the domain and to check a proposed
remote name.

Bounded, as a page's reads must be: each call has a short timeout (``READ_TIMEOUT``), the providers are
asked at once (``THREADS``), and an answer is waited for at most ``DEADLINE`` s: a provider that has not
answered by then is UNREACHABLE while the others are as they are. Each provider's answer is kept
``CACHE_SECONDS`` in Django's cache (keyed by the cluster, the name and who asks), so a page reload does
not ask the clusters again (one past the deadline is cached as unreachable). The reads touch no database;
only :func:`managed_providers` and :func:`local_cluster_id` do, before any thread starts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ALL_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from django.core.cache import cache
from kubernetes import client

from liqo_rules import constants as c
from offloading.cluster import kube
from offloading.cluster.errors import KubeError
from offloading.cluster.identity import Identity, impersonation_headers
from offloading.cluster.managed import api_client_for
from offloading.models import SnapshotState
from offloading.models.fleet import ManagedRef, is_default
from offloading.models.managed import ManagedCluster

DEADLINE = 3.0  # seconds the page waits for all providers together
# Seconds per call to a provider. The client retries a timed-out call once (cluster/client.py), so a
# provider that hangs is given up after 2 x READ_TIMEOUT: well past the DEADLINE, so the deadline alone
# decides a hung provider's answer (at 1.5 s the two ended together, and which one won was chance).
READ_TIMEOUT = 2.0
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


def whose(reading: Reading, local_id: str) -> str:
    """Whose a namespace is that is not this cluster's twin, in words."""
    if reading.owner and reading.owner != local_id and reading.managed_by:
        return f"the twin of a namespace of cluster {reading.owner}"
    if reading.owner == local_id:
        return "labelled for this cluster, but not managed by its NamespaceMap"
    return "a namespace of its own, not made by Liqo for this cluster"


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


# -- which managed clusters are providers ----------------------------------------------------------------------------------------
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
