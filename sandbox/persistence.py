"""Saving and restoring the sandbox's state across restarts (``--state FILE``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox.kinds import NAMESPACES, STORED_KINDS
from sandbox.liqo import Peer

if TYPE_CHECKING:
    from sandbox.server import Sandbox

STATE_VERSION = 1


def save_state(sandbox: Sandbox, path: str | Path) -> None:
    """Write the sandbox's state (store, peers, local cluster id) atomically to ``path``."""
    path = Path(path)
    with sandbox.store.lock:
        state = {
            "version": STATE_VERSION,
            "localClusterId": sandbox.liqo.local_cluster_id,
            "store": sandbox.store.dump(),
            "peers": [
                {
                    "id": p.cluster_id,
                    "role": p.role,
                    "namespaceDelay": p.namespace_delay,
                    "offloadingHealthy": p.offloading_healthy,
                    "namespaces": p.store.items(NAMESPACES),
                }
                for p in sandbox.liqo.peers.values()
            ],
        }
        revision = sandbox.store.revision
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh, separators=(",", ":"))
    os.replace(tmp, path)
    sandbox._saved_revision = revision


def load_state(sandbox: Sandbox, path: Path) -> None:
    """Restore what save_state wrote and resume the simulated controllers."""
    state = json.loads(path.read_text())
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"{path}: unsupported state version {state.get('version')}")
    sandbox.liqo.local_cluster_id = state["localClusterId"]
    for kind in STORED_KINDS:
        for obj in state["store"]["objects"].get(kind.key, []):
            sandbox.store.load(kind, obj)
    sandbox.store.set_revision(int(state["store"]["revision"]))
    for data in state["peers"]:
        peer = Peer(data["id"], data["role"], float(data["namespaceDelay"]), bool(data["offloadingHealthy"]))
        for ns in data["namespaces"]:
            peer.store.load(NAMESPACES, ns)
        sandbox.liqo.peers[peer.cluster_id] = peer
    sandbox.liqo.enqueue_all_offloadings(0.0)
    for cluster_id in sandbox.liqo.peers:  # e.g. a slow peer that had not finished before the restart
        sandbox.controller.enqueue("provider", cluster_id, sandbox.liqo.provider_delay(cluster_id))
    sandbox._saved_revision = sandbox.store.revision
