"""What every request shares: the `Api` (store, API server, policy, faults, traffic, admin endpoints), the
HTTP server that tracks its connections, and small query helpers."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox.api.traffic import Traffic
from sandbox.apiserver import ApiServer
from sandbox.faults import Faults
from sandbox.rbac import Policy
from sandbox.store import Store

TRUE_VALUES = ("1", "t", "T", "true", "TRUE", "True")
# An endpoint under /sandbox/: (method, JSON payload or None) -> (status, body); ValueError is a 400.
AdminHook = Callable[[str, Any], tuple[int, Any]]


def is_true(value: str | None) -> bool:
    return value in TRUE_VALUES


class Api:
    """Everything a request needs; one per sandbox, shared by the handler threads."""

    def __init__(
        self, store: Store, server: ApiServer, policy: Policy, faults: Faults, bookmark_interval: float = 60.0
    ) -> None:
        self.store = store
        self.server = server
        self.policy = policy
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.stopping = threading.Event()
        self.traffic = Traffic()
        self.admin_hooks: dict[str, AdminHook] = {}


class ApiHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its Api and can drop every open connection (outage fault)."""

    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog (socketserver's default is 5): 32 clients connecting at once would otherwise
    # see SYNs dropped and retried a second later, and their requests would not overlap.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], api: Api, handler: type[BaseHTTPRequestHandler]) -> None:
        self.api = api
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class Dropped(Exception):
    """The connection was deliberately dropped (outage / timeout faults)."""
