"""What the sandbox writes to disk: its state across restarts (``--state FILE``), compacted and saved
every two seconds, and kubeconfig files for its clients."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

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


def housekeeping(sandbox: Sandbox) -> None:
    """Every two seconds until the sandbox stops: compact old history, save the state if it changed."""
    while not sandbox._persist_stop.wait(2.0):
        sandbox.store.mark_and_compact(sandbox.compaction_window)
        if sandbox.state_file is not None and sandbox.store.revision != sandbox._saved_revision:
            save_state(sandbox, sandbox.state_file)


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
