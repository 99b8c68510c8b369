"""Fixtures for the sandbox's own tests: an in-process sandbox and clients bound to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from sandbox import Sandbox
from tests.fixtures.cluster import Sandboxes

GROUP, VERSION = "offloading.liqo.io", "v1beta1"
NSOFF = "namespaceoffloadings"


class Clients:
    """The official kubernetes client, bound to one sandbox."""

    def __init__(self, sb: Sandbox, kubeconfig: Path) -> None:
        self.sb = sb
        self.kubeconfig = kubeconfig
        self.api_client = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.authz = client.AuthorizationV1Api(self.api_client)

    def get_nsoff(self, namespace: str, name: str = "offloading") -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, NSOFF, name)

    def create_nsoff(
        self,
        namespace: str,
        spec: dict[str, Any] | None = None,
        name: str = "offloading",
        labels: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": spec if spec is not None else {"clusterSelector": {"nodeSelectorTerms": []}},
        }
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, NSOFF, body, **kwargs)


@pytest.fixture
def sandbox(sandboxes: Sandboxes) -> Sandbox:
    """The session's minimal sandbox, reset (tests/fixtures/cluster.py)."""
    return sandboxes.get("minimal")


@pytest.fixture
def kube(sandbox: Sandbox, tmp_path: Path) -> Iterator[Clients]:
    clients = Clients(sandbox, sandbox.write_kubeconfig(tmp_path / "kubeconfig"))
    yield clients
    clients.api_client.close()


def selector(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    """clusterSelector with one term per argument (a list of matchExpressions)."""
    return {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out
