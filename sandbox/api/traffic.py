"""Bytes the API server sent and requests it answered, per client (the authenticated user, before any
impersonation): what a dashboard costs the API server, read at GET /sandbox/stats (DELETE resets).
``calls`` counts the requests of each client by verb and resource (``"create namespaceoffloadings"``,
``"get namespaceoffloadings"``, ``"list namespaces"``...): the round trips a change costs; ``acting`` the
same requests by whom each client impersonated (``"liqo-dash:olga [liqo-dash:operators]"``, the user and
the impersonated groups), so a test sees the headers a client sent, not only what RBAC made of them."""

from __future__ import annotations

import threading
from typing import Any


class Traffic:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, dict[str, int]] = {}
        self._calls: dict[str, dict[str, int]] = {}
        self._acting: dict[str, dict[str, dict[str, int]]] = {}

    def add(self, client: str, sent: int = 0, requests: int = 0) -> None:
        with self._lock:
            entry = self._clients.setdefault(client, {"bytes": 0, "requests": 0})
            entry["bytes"] += sent
            entry["requests"] += requests

    def call(self, client: str, verb: str, resource: str, acting: str = "") -> None:
        """Count one request of ``client``: ``verb`` (Kubernetes' name: get, list, watch, create, update,
        patch, delete) on ``resource`` (its plural, ``/status`` for the subresource); ``acting``: whom it
        impersonated ("" when it acted as itself)."""
        key = f"{verb} {resource}"
        with self._lock:
            per_client = self._calls.setdefault(client, {})
            per_client[key] = per_client.get(key, 0) + 1
            if acting:
                per_identity = self._acting.setdefault(client, {}).setdefault(acting, {})
                per_identity[key] = per_identity.get(key, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            clients = {name: dict(entry) for name, entry in sorted(self._clients.items())}
            calls = {name: dict(sorted(entry.items())) for name, entry in sorted(self._calls.items())}
            acting = {
                name: {who: dict(sorted(keys.items())) for who, keys in sorted(entry.items())}
                for name, entry in sorted(self._acting.items())
            }
        total = sum(e["bytes"] for e in clients.values())
        return {"clients": clients, "total_bytes": total, "calls": calls, "acting": acting}

    def reset(self) -> None:
        with self._lock:
            self._clients.clear()
            self._calls.clear()
            self._acting.clear()


class CountingWriter:
    """The handler's wfile, counting every byte written for whoever the handler says the client is."""

    def __init__(self, raw: Any, traffic: Traffic, handler: Any) -> None:
        self._raw = raw
        self._traffic = traffic
        self._handler = handler

    def write(self, data: bytes) -> int:
        written = self._raw.write(data)
        self._traffic.add(self._handler.client_identity, len(data))
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)
