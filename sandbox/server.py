"""`Sandbox`: one sandbox cluster (store + API server + simulated Liqo + HTTP server) in this process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sandbox import persistence, scenarios
from sandbox.admin import AdminEndpoints
from sandbox.api import Api, ApiHTTPServer, Handler
from sandbox.apiserver import ApiServer
from sandbox.faults import Faults
from sandbox.kinds import BY_KEY
from sandbox.liqo import LiqoSimulation
from sandbox.persistence import Housekeeping, StateFile
from sandbox.rbac import ADMIN_USER, Policy
from sandbox.runtime import Controller
from sandbox.store import Store


class Sandbox:
    """A sandbox Kubernetes API with simulated Liqo.

    sb = Sandbox(scenario="demo", controller_delay=0.0, port=0); sb.start(); sb.url; sb.stop()
    """

    def __init__(
        self,
        scenario: str | Path | dict[str, Any] = "minimal",
        *,
        controller_delay: float = 0.0,
        port: int = 0,
        host: str = "127.0.0.1",
        state_file: str | Path | None = None,
        rbac: str | Path | dict[str, Any] | None = None,
        bookmark_interval: float = 60.0,
        log_size: int = 20000,
        compaction_window: float = 300.0,
    ) -> None:
        self.scenario = scenario
        self.controller_delay = float(controller_delay)
        self.host = host
        self.requested_port = int(port)
        self.state_file = Path(state_file) if state_file else None
        self.compaction_window = compaction_window
        self._rbac = rbac
        self._bookmark_interval = bookmark_interval
        self._log_size = log_size
        self._build()
        self._http: ApiHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self.started = False

    def _build(self) -> None:
        """The cluster's parts, empty: store, API server, faults, RBAC, controllers, simulated Liqo."""
        self.store = Store(log_size=self._log_size)
        self.server = ApiServer(self.store)
        self.faults = Faults()
        self.policy = Policy(self._rbac)
        self.controller = Controller()
        self.liqo = LiqoSimulation(self.server, self.controller, self.faults, "local", self.controller_delay)
        self.api = Api(self.store, self.server, self.policy, self.faults, bookmark_interval=self._bookmark_interval)
        admin = AdminEndpoints(self.faults, self.controller, self.store, self.liqo, self.api.traffic)
        self.api.admin_hooks.update(admin.hooks())
        # an outage also ends the watches that are open
        self.faults.add_listener(lambda settings: self.store.close_watchers() if settings.outage else None)
        self.state = (
            StateFile(self.state_file, self.store, self.liqo, self.controller) if self.state_file is not None else None
        )
        self.housekeeping = Housekeeping(self.store, self.compaction_window, self.state)

    def _load(self) -> None:
        """The state file's objects when there is one, else the scenario's, converged at once."""
        if self.state is not None and self.state.exists():
            self.state.load()
        else:
            data = scenarios.load(self.scenario)
            delay = self.liqo.controller_delay
            self.liqo.controller_delay = 0.0  # the initial fleet converges at once, whatever the delay
            scenarios.converge(data, self.server, self.liqo, self.controller)
            scenarios.apply_pods(data, self.server)
            self.controller.drain(horizon=1.0)
            self.liqo.controller_delay = delay
        self.store.reset_history()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> Sandbox:
        if self.started:
            return self
        self._load()
        self.controller.start()
        self._http = ApiHTTPServer((self.host, self.requested_port), self.api, Handler)
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.2}, name="sandbox-http", daemon=True
        )
        self._http_thread.start()
        self.housekeeping.start()
        self.started = True
        return self

    def stop(self) -> None:
        if not self.started:
            return
        self.api.stopping.set()
        self.store.close_watchers()
        if self._http is not None:
            self._http.shutdown()
            self._http.close_connections()
            self._http.server_close()
        if self._http_thread is not None:
            self._http_thread.join(10)
        self.housekeeping.stop()
        self.controller.stop()
        if self.state is not None:
            self.state.save()
        self.started = False

    def reset(self) -> Sandbox:
        """Back to the scenario as ``start`` loaded it, on the same address and tokens, in milliseconds:
        every object, fault, watch, controller queue and request count of before is dropped (open
        connections are closed, so no client keeps talking to the old cluster) and the scenario loaded
        again. A state file is not written (the state is thrown away, not stopped)."""
        if not self.started or self._http is None:
            raise RuntimeError("the sandbox is not started")
        self.api.stopping.set()  # the old cluster's delayed answers and watches end now
        self.housekeeping.stop()
        self.controller.stop()
        self.store.close_watchers()
        self._http.close_connections()
        self._build()
        self._load()
        self._http.api = self.api
        self.controller.start()
        self.housekeeping.start()
        return self

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses and kubeconfig ------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._http is None:
            raise RuntimeError("the sandbox is not started")
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def kubeconfig(self, user: str = ADMIN_USER) -> dict[str, Any]:
        return persistence.kubeconfig(self.url, user, self.policy.token_for(user))

    def write_kubeconfig(self, path: str | Path, user: str = ADMIN_USER) -> Path:
        return persistence.write_yaml(Path(path), self.kubeconfig(user))

    # -- test helpers ------------------------------------------------------------------------------
    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Return once the simulated controllers have nothing running or due within `timeout` seconds."""
        return self.controller.wait_idle(timeout)

    def compact(self) -> int:
        """Drop all watch / list history now: older resourceVersions and continue tokens answer 410."""
        return self.store.compact()

    def remote_namespaces(self, cluster_id: str) -> dict[str, dict[str, Any]]:
        """The namespaces that exist in a simulated provider cluster, by name."""
        return self.liqo.peers[cluster_id].namespaces()

    def add_remote_namespace(self, cluster_id: str, name: str, annotations: dict[str, str] | None = None) -> None:
        """Create a namespace directly in a provider cluster (e.g. to provoke an EnforceSameName conflict)."""
        self.liqo.peers[cluster_id].add_namespace(name, annotations)

    def get(self, plural_key: str, namespace: str, name: str) -> dict[str, Any] | None:
        """Read an object straight from the store, e.g. get("namespaceoffloadings.offloading.liqo.io", ns, "offloading")."""
        return self.store.get(BY_KEY[plural_key], namespace, name)

    def save_state(self, path: str | Path) -> None:
        """Write the state to `path` (what --state-file restores)."""
        persistence.save_state(self.store, self.liqo, path)
