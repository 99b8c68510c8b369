"""A Kubernetes client per managed cluster (issue 28) and the discovery of what each one is: its Liqo
cluster id, its Liqo version and whether it answers, stored on its ``ManagedCluster`` row.

The default cluster with no context named is the process's own client (``client.api_client()``), so a
single-cluster install talks to its API server exactly as before. Another context is loaded from the
configured kubeconfig; registered credentials become an in-memory kubeconfig. Every client gets the same
tuning as the process's (``offloading.cluster.client``) and is kept per process until the row's
connection details change.

Discovery reads what ``liqoctl info`` reads:

- the cluster id: Liqo's ConfigMap in its namespace labelled ``app.kubernetes.io/name=clusterid-configmap``
  (key ``CLUSTER_ID``); when it cannot be read, the tenant namespace a peer holds for this cluster,
  ``liqo-tenant-<id>``, from a ForeignCluster's ``status.tenantNamespace.remote``;
- the version: the tag of the controller manager's image, as the watcher reads it for the default
  cluster (``liqo_rules.versions``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone
from kubernetes import client, config

from liqo_rules import constants as liqo
from liqo_rules import versions
from offloading.cluster import client as clientconf
from offloading.cluster import kube
from offloading.cluster.errors import KubeError
from offloading.models.managed import (
    CredentialsKeyMissing,
    CredentialsUnreadable,
    ManagedCluster,
    ManagedClusterHealth,
    ManagedClusterSource,
    ensure_configured,
)

CLUSTER_ID_SELECTOR = "app.kubernetes.io/name=clusterid-configmap"
CLUSTER_ID_KEY = "CLUSTER_ID"
_FC = ("core.liqo.io", "v1beta1", "foreignclusters")
# How many clusters discovery asks at once (each waits on its API server, not on the CPU).
DISCOVERY_THREADS = 8

log = logging.getLogger(__name__)
_lock = threading.Lock()
_clients: dict[int, tuple[str, client.ApiClient]] = {}


def connection_fingerprint(cluster: ManagedCluster) -> str:
    """What the client depends on: a change of any of them builds a new one (and the watcher restarts
    the cluster's engine on the new client)."""
    parts = [cluster.source, cluster.context, cluster.api_server_url, cluster.ca_bundle, cluster.credentials_encrypted]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _is_process_default(cluster: ManagedCluster) -> bool:
    return cluster.source == ManagedClusterSource.CONTEXT and not cluster.context


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def credentials_kubeconfig(cluster: ManagedCluster) -> dict[str, Any]:
    """A kubeconfig (as a dict, never written out) for a cluster registered with credentials."""
    credentials = cluster.credentials()
    server: dict[str, Any] = {"server": cluster.api_server_url}
    if cluster.ca_bundle.strip():
        server["certificate-authority-data"] = _b64(cluster.ca_bundle)
    user: dict[str, Any] = {}
    if credentials.token:
        user["token"] = credentials.token
    if credentials.client_certificate and credentials.client_key:
        user["client-certificate-data"] = _b64(credentials.client_certificate)
        user["client-key-data"] = _b64(credentials.client_key)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster.name, "cluster": server}],
        "users": [{"name": cluster.name, "user": user}],
        "contexts": [{"name": cluster.name, "context": {"cluster": cluster.name, "user": cluster.name}}],
        "current-context": cluster.name,
    }


def configuration_for(cluster: ManagedCluster) -> client.Configuration:
    """The client configuration of a managed cluster other than the process's own; raises KubeError
    (transient: it may be fixed by configuration) when there is none usable."""
    cfg = clientconf.new_configuration()
    try:
        if cluster.source == ManagedClusterSource.CREDENTIALS:
            return clientconf.load_kubeconfig_dict(cfg, credentials_kubeconfig(cluster))
        return clientconf.load_kubeconfig_context(cfg, cluster.context)
    except (config.ConfigException, OSError, ValueError, CredentialsKeyMissing, CredentialsUnreadable) as exc:
        raise KubeError("transient", f"no usable Kubernetes configuration for cluster {cluster.name}: {exc}") from exc


def api_client_for(cluster: ManagedCluster) -> client.ApiClient:
    """The ApiClient of ``cluster``, one per process and cluster, rebuilt when its connection details
    change. The default cluster on the current context gets the process's own client. Do not close it."""
    if _is_process_default(cluster):
        return clientconf.api_client()
    fingerprint = connection_fingerprint(cluster)
    with _lock:
        known = _clients.get(cluster.pk)
        if known is not None and known[0] == fingerprint:
            return known[1]
    built = client.ApiClient(configuration_for(cluster))
    with _lock:
        known = _clients.get(cluster.pk)
        if known is not None and known[0] == fingerprint:
            built.close()
            return known[1]
        _clients[cluster.pk] = (fingerprint, built)
    if known is not None:
        known[1].close()
    return built


def pace_key(cluster: ManagedCluster | None) -> int | None:
    """Whose pacer and breaker a cluster's requests use: None for the default cluster (the keys of
    single-cluster versions), else its primary key. No query (the row says whether it is the default)."""
    return None if cluster is None or cluster.is_default else int(cluster.pk)


@contextlib.contextmanager
def talking_to(cluster: ManagedCluster | None, *, paced: bool = False) -> Iterator[None]:
    """Make the ``kube`` calls of the block that name no client on ``cluster``'s API server (None or the
    default cluster: the process's own), and with ``paced`` through that cluster's pacer (its bound in flight and 429 hold).
    No database access: safe in a bulk's pushing threads. Raises KubeError when the cluster has no
    usable configuration (transient: retried as an unreachable API server would be)."""
    # The default cluster is the process's own client, as for the refresh (snapshot.refresh._client_of).
    api = None if cluster is None or cluster.is_default else api_client_for(cluster)
    with kube.bound_to(api), kube.paced(pace_key(cluster)) if paced else contextlib.nullcontext():
        yield


def forget_clients(keep: set[int] | None = None) -> None:
    """Close and forget the managed clusters' clients, all of them (tests; a process that reconfigures)
    or those of clusters not in ``keep`` (primary keys): a cluster removed meanwhile."""
    with _lock:
        gone = [pk for pk in _clients if keep is None or pk not in keep]
        old = [_clients.pop(pk) for pk in gone]
    for _, api in old:
        api.close()


def _get(method: Any, *args: Any, timeout: float, **kwargs: Any) -> dict[str, Any]:
    """One read through ``method`` (a client method bound to the cluster's client)."""
    return kube.read_object(method, *args, timeout=timeout, **kwargs)


@dataclass
class Discovery:
    """What one look at a managed cluster found. Empty ``cluster_id`` / ``version``: not found this time
    (the stored values are then kept)."""

    health: str
    cluster_id: str = ""
    version: str = ""
    error: str = ""


def _refused(exc: KubeError) -> bool:
    return exc.status == 401


def _refusal(exc: KubeError) -> Discovery:
    return Discovery(
        ManagedClusterHealth.UNREACHABLE, error=f"the API server refused the credentials (HTTP {exc.status}): {exc}"
    )


def _cluster_id(api: client.ApiClient, timeout: float) -> str:
    try:
        found = _get(
            client.CoreV1Api(api).list_namespaced_config_map,
            versions.LIQO_NAMESPACE,
            label_selector=CLUSTER_ID_SELECTOR,
            timeout=timeout,
        )
    except KubeError as exc:
        if _refused(exc) or exc.unreachable:
            raise
        found = {}  # e.g. not allowed to read ConfigMaps there: the peers may tell
    for item in found.get("items") or []:
        value = str((item.get("data") or {}).get(CLUSTER_ID_KEY) or "")
        if value:
            return value
    try:
        peers = _get(client.CustomObjectsApi(api).list_cluster_custom_object, *_FC, limit=50, timeout=timeout)
    except KubeError as exc:
        if exc.kind == "not_found":  # Liqo's CRDs are not installed
            return ""
        raise
    for fc in peers.get("items") or []:
        remote = str(((fc.get("status") or {}).get("tenantNamespace") or {}).get("remote") or "")
        if remote.startswith(liqo.TENANT_NAMESPACE_PREFIX) and len(remote) > len(liqo.TENANT_NAMESPACE_PREFIX):
            return remote[len(liqo.TENANT_NAMESPACE_PREFIX) :]
    return ""


def _liqo_version(api: client.ApiClient, timeout: float) -> str:
    found = _get(
        client.AppsV1Api(api).list_namespaced_deployment,
        versions.LIQO_NAMESPACE,
        label_selector=versions.CONTROLLER_MANAGER_SELECTOR,
        timeout=timeout,
    )
    for deployment in found.get("items") or []:
        if versions.is_controller_manager(deployment):
            tag = versions.controller_manager_version(deployment)
            if tag:
                return tag
    return ""


def discover(cluster: ManagedCluster, timeout: float | None = None) -> Discovery:
    """Ask ``cluster``'s API server who it is (no database access: safe in a thread). Unreachable: no
    usable configuration, no answer, or credentials refused (401); reachable otherwise, with what could
    not be read in ``error``."""
    timeout = float(timeout if timeout is not None else settings.LIQO_DASH["KUBE_REQUEST_TIMEOUT"])
    try:
        api = api_client_for(cluster)
        _get(client.VersionApi(api).get_code, timeout=timeout)
    except KubeError as exc:
        if _refused(exc):
            return _refusal(exc)
        return Discovery(ManagedClusterHealth.UNREACHABLE, error=str(exc))
    result = Discovery(ManagedClusterHealth.REACHABLE)
    notes = []
    for what, read in (("Liqo cluster id", _cluster_id), ("Liqo version", _liqo_version)):
        try:
            value = read(api, timeout)
        except KubeError as exc:
            if _refused(exc):
                return _refusal(exc)
            if exc.unreachable:
                return Discovery(ManagedClusterHealth.UNREACHABLE, error=str(exc))
            notes.append(f"cannot read the {what}: {exc}")
            continue
        if not value:
            notes.append(f"no {what} found (is Liqo installed in namespace {versions.LIQO_NAMESPACE}?)")
        if what == "Liqo cluster id":
            result.cluster_id = value
        else:
            result.version = value
    result.error = "; ".join(notes)
    return result


def store(cluster: ManagedCluster, found: Discovery) -> ManagedCluster:
    """Write what discovery found on the row (an update of those columns only: an admin's edit of the
    connection details at the same time is kept) and return the row as stored."""
    fields: dict[str, Any] = {
        "health": found.health,
        "last_checked_at": timezone.now(),
        "last_error": found.error[:4000],
    }
    if found.cluster_id:
        fields["liqo_cluster_id"] = found.cluster_id[:63]
    if found.version:
        fields["liqo_version"] = found.version[:64]
    ManagedCluster.objects.filter(pk=cluster.pk).update(**fields)
    cluster.refresh_from_db()
    return cluster


def refresh(cluster: ManagedCluster, timeout: float | None = None) -> ManagedCluster:
    """Discover one managed cluster and store what was found."""
    return store(cluster, discover(cluster, timeout))


def _discover_safely(cluster: ManagedCluster, timeout: float | None) -> Discovery:
    """discover(), with an unexpected failure noted on that cluster instead of ending everyone's refresh."""
    try:
        return discover(cluster, timeout)
    except Exception as exc:  # noqa: BLE001 - one cluster's surprise must not hide the others' health
        log.exception("discovery of managed cluster %s failed", cluster.name)
        return Discovery(ManagedClusterHealth.UNKNOWN, error=f"discovery failed: {exc!r}")


def refresh_all(timeout: float | None = None) -> dict[str, int]:
    """Make the configured contexts' rows exist, then discover every managed cluster (several at once)
    and store the results; returns how many are in each health."""
    ensure_configured()
    clusters = list(ManagedCluster.objects.all())
    forget_clients(keep={cluster.pk for cluster in clusters})  # the clients of clusters removed since
    if not clusters:
        return {}
    with ThreadPoolExecutor(max_workers=min(DISCOVERY_THREADS, len(clusters))) as pool:
        found = list(pool.map(lambda c: _discover_safely(c, timeout), clusters))
    counts: dict[str, int] = {}
    for cluster, result in zip(clusters, found, strict=True):
        store(cluster, result)
        counts[result.health] = counts.get(result.health, 0) + 1
    return counts
