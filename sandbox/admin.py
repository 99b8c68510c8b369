"""The sandbox's own admin endpoints under /sandbox/ (faults, idle, compact, peers): (status, body)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.server import Sandbox


# -- admin endpoints ---------------------------------------------------------------------------
def faults_endpoint(sandbox: Sandbox, method: str, payload: Any) -> tuple[int, Any]:
    if method == "GET":
        return 200, sandbox.faults.as_dict()
    if method == "PUT":
        return 200, _settings(sandbox.faults.replace(payload or {}))
    if method == "PATCH":
        return 200, _settings(sandbox.faults.set(**(payload or {})))
    if method == "DELETE":
        return 200, _settings(sandbox.faults.clear())
    return 405, {"error": "use GET, PUT, PATCH or DELETE"}


def _settings(settings: Any) -> dict[str, Any]:
    return asdict(settings)


def idle_endpoint(sandbox: Sandbox, method: str, payload: Any) -> tuple[int, Any]:
    timeout = float((payload or {}).get("timeout", 10.0))
    try:
        sandbox.wait_idle(timeout)
    except TimeoutError as exc:
        return 504, {"idle": False, "error": str(exc)}
    return 200, {"idle": True}


def compact_endpoint(sandbox: Sandbox, method: str, payload: Any) -> tuple[int, Any]:
    if method != "POST":
        return 405, {"error": "use POST"}
    return 200, {"compacted": sandbox.compact()}


def stats_endpoint(sandbox: Sandbox, method: str, payload: Any) -> tuple[int, Any]:
    """Bytes served and requests answered per client, 429s and the most requests in flight at once
    (GET); DELETE starts the counts over."""
    traffic = sandbox.api.traffic
    if method == "DELETE":
        traffic.reset()
        sandbox.faults.reset_peak()
    elif method != "GET":
        return 405, {"error": "use GET or DELETE"}
    faults = sandbox.faults
    return 200, {**traffic.as_dict(), "throttled": faults.throttled, "peak_inflight": faults.peak_inflight}


def peers_endpoint(sandbox: Sandbox, method: str, payload: Any) -> tuple[int, Any]:
    """GET: the namespaces of every peer. PATCH {"cluster": id, "offloadingHealthy": bool, "namespaces":
    [names], "namespaceMapWritable": bool}: turn a peer's offloading module healthy or not, create
    namespaces in it directly, let Liqo's controller patch its NamespaceMap or not."""
    if method == "PATCH":
        if not isinstance(payload, dict) or not isinstance(payload.get("cluster"), str):
            raise ValueError('give {"cluster": "<id>", "offloadingHealthy": true|false, "namespaces": [...]}')
        unknown = set(payload) - {"cluster", "offloadingHealthy", "namespaces", "namespaceMapWritable"}
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
        healthy = payload.get("offloadingHealthy")
        if healthy is not None and not isinstance(healthy, bool):
            raise ValueError("offloadingHealthy must be true or false")
        names = payload.get("namespaces") or []
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ValueError("namespaces must be a list of names")
        writable = payload.get("namespaceMapWritable")
        if writable is not None and not isinstance(writable, bool):
            raise ValueError("namespaceMapWritable must be true or false")
        sandbox.liqo.set_peer(
            payload["cluster"], offloading_healthy=healthy, namespaces=names, namespace_map_writable=writable
        )
    elif method != "GET":
        return 405, {"error": "use GET or PATCH"}
    return 200, {cid: sorted(p.namespaces()) for cid, p in sandbox.liqo.peers.items()}
