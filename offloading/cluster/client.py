"""The one Kubernetes ApiClient of a process, configured from settings (in-cluster or a kubeconfig);
``offloading.cluster.kube`` makes every call through it."""

from __future__ import annotations

import threading

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


def reset_client() -> None:
    """Forget the configured client (tests point the same process at another API server)."""
    global _client
    with _lock:
        _client = None


def _configuration() -> client.Configuration:
    cfg = client.Configuration()
    # One kept-alive connection per request in flight (a bulk's threads), not 5 per CPU: beyond its pool
    # urllib3 opens a new connection for every request and drops it after.
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize, int(settings.LIQO_DASH.get("KUBE_MAX_INFLIGHT", 32)))
    opts = settings.LIQO_DASH
    mode = opts["KUBE_CONFIG_MODE"]
    if mode in ("auto", "incluster"):
        try:
            config.load_incluster_config(client_configuration=cfg)
            cfg.retries = 1
            return cfg
        except config.ConfigException:
            if mode == "incluster":
                raise
    config.load_kube_config(
        config_file=opts["KUBECONFIG"] or None,
        context=opts["KUBE_CONTEXT"] or None,
        client_configuration=cfg,
        persist_config=False,
    )
    # Our tasks retry with backoff themselves; one quick retry here only rides over a dropped
    # keep-alive connection.
    cfg.retries = 1
    return cfg
