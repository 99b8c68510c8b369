"""The one Kubernetes ApiClient of a process, configured from settings (in-cluster or a kubeconfig);
``offloading.cluster.kube`` makes every call through it. The configuration helpers below are shared with
the managed clusters' clients (``offloading.cluster.managed``), so every client is tuned the same way.

Inside a :func:`bound_to` block (a change pushed, reviewed or dry-run on its managed cluster) the calls of
``kube`` that name no client go to the bound one (:func:`current_client`); the process's own client
otherwise. Leases and the audit anchor's ConfigMap always use the process's own (the home API server)."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from kubernetes import client, config

from offloading.cluster.errors import KubeError

_lock = threading.Lock()
_client: client.ApiClient | None = None


def api_client() -> client.ApiClient:
    """One ApiClient per process, configured from settings on first use."""
    global _client
    with _lock:
        if _client is None:
            try:
                _client = client.ApiClient(_configuration())
            except (config.ConfigException, OSError) as exc:
                # A missing or unreadable kubeconfig is reported like an unreachable API server: the
                # snapshot goes stale, changes stay queued and are retried.
                raise KubeError("transient", f"no usable Kubernetes configuration: {exc}") from exc
        return _client


_bound: contextvars.ContextVar[client.ApiClient | None] = contextvars.ContextVar("liqo_dash_bound_client", default=None)


@contextlib.contextmanager
def bound_to(api: client.ApiClient | None) -> Iterator[None]:
    """Send the calls made in the block that name no client to ``api`` (None: the process's own)."""
    token = _bound.set(api)
    try:
        yield
    finally:
        _bound.reset(token)


def current_client() -> client.ApiClient:
    """The client of the enclosing :func:`bound_to` block, else the process's own."""
    return _bound.get() or api_client()


def reset_client() -> None:
    """Forget the configured client (tests point the same process at another API server)."""
    global _client
    with _lock:
        _client = None


def new_configuration() -> client.Configuration:
    """An empty Configuration with the pool size every client of liqo-dash uses."""
    cfg = client.Configuration()
    # One kept-alive connection per request in flight (a bulk's threads), not 5 per CPU: beyond its pool
    # urllib3 opens a new connection for every request and drops it after.
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize, int(settings.LIQO_DASH.get("KUBE_MAX_INFLIGHT", 32)))
    return cfg


def finish_configuration(cfg: client.Configuration) -> client.Configuration:
    """What every client sets once its server and credentials are loaded."""
    # Our tasks retry with backoff themselves; one quick retry here only rides over a dropped
    # keep-alive connection.
    cfg.retries = 1
    return cfg


def load_kubeconfig_context(cfg: client.Configuration, context: str) -> client.Configuration:
    """Load ``context`` ("" for the current one) of the configured kubeconfig (KUBECONFIG, else
    ~/.kube/config) into ``cfg``; raises ConfigException or OSError when it cannot."""
    config.load_kube_config(
        config_file=settings.LIQO_DASH["KUBECONFIG"] or None,
        context=context or None,
        client_configuration=cfg,
        persist_config=False,
    )
    return finish_configuration(cfg)


def load_kubeconfig_dict(cfg: client.Configuration, document: dict[str, Any]) -> client.Configuration:
    """Load the current context of a kubeconfig held in memory into ``cfg`` (the client writes the
    certificate and key data it needs to private temporary files, as for any kubeconfig)."""
    config.load_kube_config_from_dict(document, client_configuration=cfg, persist_config=False)
    return finish_configuration(cfg)


def _configuration() -> client.Configuration:
    cfg = new_configuration()
    opts = settings.LIQO_DASH
    mode = opts["KUBE_CONFIG_MODE"]
    if mode in ("auto", "incluster"):
        try:
            config.load_incluster_config(client_configuration=cfg)
            return finish_configuration(cfg)
        except config.ConfigException:
            if mode == "incluster":
                raise
    return load_kubeconfig_context(cfg, opts["KUBE_CONTEXT"])
