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
    """Bytes served per client (GET); DELETE starts the count over."""
    traffic = sandbox.api.traffic
    if method == "DELETE":
        traffic.reset()
    elif method != "GET":
        return 405, {"error": "use GET or DELETE"}
    return 200, {**traffic.as_dict(), "throttled": sandbox.faults.throttled}


def peers_endpoint(sandbox: Sandbox, method: str, payload: Any) -> tuple[int, Any]:
    return 200, {cid: sorted(p.namespaces()) for cid, p in sandbox.liqo.peers.items()}
