"""The sandbox's own endpoints under /sandbox/ (faults, idle, compact, peers, stats), not part of the
Kubernetes API: each takes (method, JSON payload) and answers (status, body); a ValueError is a 400."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sandbox.api.context import AdminHook
from sandbox.api.traffic import Traffic
from sandbox.faults import Faults
from sandbox.liqo import LiqoSimulation
from sandbox.runtime import Controller
from sandbox.store import Store


class AdminEndpoints:
    """The endpoints, over the parts of the sandbox they read and change."""

    def __init__(
        self, faults: Faults, controller: Controller, store: Store, liqo: LiqoSimulation, traffic: Traffic
    ) -> None:
        self.faults = faults
        self.controller = controller
        self.store = store
        self.liqo = liqo
        self.traffic = traffic

    def hooks(self) -> dict[str, AdminHook]:
        """By name: /sandbox/<name>."""
        return {
            "faults": self.faults_endpoint,
            "idle": self.idle_endpoint,
            "compact": self.compact_endpoint,
            "peers": self.peers_endpoint,
            "stats": self.stats_endpoint,
        }

    def faults_endpoint(self, method: str, payload: Any) -> tuple[int, Any]:
        if method == "GET":
            return 200, self.faults.as_dict()
        if method == "PUT":
            return 200, asdict(self.faults.replace(payload or {}))
        if method == "PATCH":
            return 200, asdict(self.faults.set(**(payload or {})))
        if method == "DELETE":
            return 200, asdict(self.faults.clear())
        return 405, {"error": "use GET, PUT, PATCH or DELETE"}

    def idle_endpoint(self, method: str, payload: Any) -> tuple[int, Any]:
        timeout = float((payload or {}).get("timeout", 10.0))
        try:
            self.controller.wait_idle(timeout)
        except TimeoutError as exc:
            return 504, {"idle": False, "error": str(exc)}
        return 200, {"idle": True}

    def compact_endpoint(self, method: str, payload: Any) -> tuple[int, Any]:
        if method != "POST":
            return 405, {"error": "use POST"}
        return 200, {"compacted": self.store.compact()}

    def stats_endpoint(self, method: str, payload: Any) -> tuple[int, Any]:
        """Bytes served and requests answered per client, 429s and the most requests in flight at once
        (GET); DELETE starts the counts over."""
        if method == "DELETE":
            self.traffic.reset()
            self.faults.reset_peak()
        elif method != "GET":
            return 405, {"error": "use GET or DELETE"}
        faults = self.faults
        return 200, {**self.traffic.as_dict(), "throttled": faults.throttled, "peak_inflight": faults.peak_inflight}

    def peers_endpoint(self, method: str, payload: Any) -> tuple[int, Any]:
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
            self.liqo.set_peer(
                payload["cluster"], offloading_healthy=healthy, namespaces=names, namespace_map_writable=writable
            )
        elif method != "GET":
            return 405, {"error": "use GET or PATCH"}
        return 200, {cid: sorted(p.namespaces()) for cid, p in self.liqo.peers.items()}
