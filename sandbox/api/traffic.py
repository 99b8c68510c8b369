"""Bytes the API server sent, per client (the authenticated user, before any impersonation): what a
dashboard costs the API server, read at GET /sandbox/stats (DELETE resets)."""

from __future__ import annotations

import threading
from typing import Any


class Traffic:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, dict[str, int]] = {}

    def add(self, client: str, sent: int = 0, requests: int = 0) -> None:
        with self._lock:
            entry = self._clients.setdefault(client, {"bytes": 0, "requests": 0})
            entry["bytes"] += sent
            entry["requests"] += requests

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            clients = {name: dict(entry) for name, entry in sorted(self._clients.items())}
        return {"clients": clients, "total_bytes": sum(e["bytes"] for e in clients.values())}

    def reset(self) -> None:
        with self._lock:
            self._clients.clear()


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
