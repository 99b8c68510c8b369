"""What the sandbox writes to disk: its state across restarts (``--state-file``), saved every two seconds
by the housekeeping thread (which also compacts the history), and kubeconfig files for its clients."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

from sandbox.kinds import NAMESPACES, STORED_KINDS
from sandbox.liqo import LiqoSimulation, Peer
from sandbox.runtime import Controller
from sandbox.store import Store

STATE_VERSION = 1
HOUSEKEEPING_INTERVAL = 2.0  # seconds


def save_state(store: Store, liqo: LiqoSimulation, path: str | Path) -> int:
    """Write the state (store, peers, local cluster id) atomically to ``path``; the revision written."""
    path = Path(path)
    with store.lock:
        state = {
            "version": STATE_VERSION,
            "localClusterId": liqo.local_cluster_id,
            "store": store.dump(),
            "peers": [
                {
                    "id": p.cluster_id,
                    "role": p.role,
                    "namespaceDelay": p.namespace_delay,
                    "offloadingHealthy": p.offloading_healthy,
                    # a domain's peer saves its own namespaces (and reading its store here would take its lock)
                    "namespaces": [] if p.finalizes_namespaces else p.store.items(NAMESPACES),
                }
                for p in liqo.peers.values()
            ],
        }
        revision = store.revision
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh, separators=(",", ":"))
    os.replace(tmp, path)
    return revision


def load_state(store: Store, liqo: LiqoSimulation, controller: Controller, path: Path) -> None:
    """Restore what save_state wrote and resume the simulated controllers."""
    state = json.loads(path.read_text())
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"{path}: unsupported state version {state.get('version')}")
    liqo.local_cluster_id = state["localClusterId"]
    for kind in STORED_KINDS:
        for obj in state["store"]["objects"].get(kind.key, []):
            store.load(kind, obj)
    store.set_revision(int(state["store"]["revision"]))
    for data in state["peers"]:
        peer = Peer(data["id"], data["role"], float(data["namespaceDelay"]), bool(data["offloadingHealthy"]))
        for ns in data["namespaces"]:
            peer.store.load(NAMESPACES, ns)
        liqo.peers[peer.cluster_id] = peer
    liqo.enqueue_all_offloadings(0.0)
    for cluster_id in liqo.peers:  # e.g. a slow peer that had not finished before the restart
        controller.enqueue("provider", cluster_id, liqo.provider_delay(cluster_id))


class StateFile:
    """The sandbox's state across restarts (``--state-file``): restored at start, saved when it changed."""

    def __init__(self, path: Path, store: Store, liqo: LiqoSimulation, controller: Controller) -> None:
        self.path = path
        self.store = store
        self.liqo = liqo
        self.controller = controller
        self.saved_revision = -1

    def exists(self) -> bool:
        return self.path.exists()

    def load(self) -> None:
        load_state(self.store, self.liqo, self.controller, self.path)
        self.saved_revision = self.store.revision

    def save(self) -> None:
        self.saved_revision = save_state(self.store, self.liqo, self.path)

    def save_if_changed(self) -> None:
        if self.store.revision != self.saved_revision:
            self.save()


class Housekeeping:
    """A thread that, every two seconds until stopped, compacts the history older than `window` seconds
    and saves the state file (if any) when the store changed."""

    def __init__(self, store: Store, window: float, state: StateFile | None) -> None:
        self.store = store
        self.window = window
        self.state = state
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sandbox-housekeeping", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(HOUSEKEEPING_INTERVAL):
            self.store.mark_and_compact(self.window)
            if self.state is not None:
                self.state.save_if_changed()


def kubeconfig(url: str, user: str, token: str) -> dict[str, Any]:
    """A kubeconfig for the sandbox at ``url`` as ``user`` (bearer token)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sandbox", "cluster": {"server": url}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": user}}],
        "current-context": "sandbox",
        "preferences": {},
    }


def write_yaml(path: Path, document: dict[str, Any]) -> Path:
    """Write ``document`` as YAML to ``path`` atomically (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(document, sort_keys=False))
    os.replace(tmp, path)
    return path
