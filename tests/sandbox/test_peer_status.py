"""The ForeignCluster and VirtualNode status the sandbox writes reads back, through the dashboard's own rules
(`liqo_rules.peers`), as the health the peer was given: one vocabulary for writer and reader."""

from __future__ import annotations

import pytest

from liqo_rules.peers import (
    ROLE_CONSUMER,
    ROLE_CONSUMER_AND_PROVIDER,
    ROLE_PROVIDER,
    module_status,
    virtual_node_healthy,
)
from sandbox.liqo.context import Peer
from sandbox.liqo.peers import foreign_cluster_status, virtual_node_status


def _modules(peer: Peer, up: bool) -> dict[str, str]:
    status = foreign_cluster_status(peer, "rome", up)
    return {name: module_status(module)[0] for name, module in status["modules"].items()}


@pytest.mark.parametrize("role", [ROLE_PROVIDER, ROLE_CONSUMER_AND_PROVIDER])
def test_a_healthy_provider_reads_back_healthy(role: str) -> None:
    peer = Peer("milan", role=role)
    assert _modules(peer, up=True) == {"networking": "Healthy", "authentication": "Healthy", "offloading": "Healthy"}
    assert virtual_node_healthy({"status": virtual_node_status(peer, up=True)})


def test_a_consumer_has_no_offloading_module() -> None:
    assert _modules(Peer("bologna", role=ROLE_CONSUMER), up=True)["offloading"] == "Disabled"


def test_an_unhealthy_offloading_module_reads_back_unhealthy() -> None:
    peer = Peer("florence", offloading_healthy=False)
    modules = _modules(peer, up=True)
    assert modules["offloading"] == "Unhealthy" and modules["networking"] == "Healthy"
    assert not virtual_node_healthy({"status": virtual_node_status(peer, up=True)})


def test_a_peer_that_is_down_reads_back_unhealthy() -> None:
    peer = Peer("milan")
    modules = _modules(peer, up=False)
    assert modules["networking"] == "Unhealthy" and modules["offloading"] == "Unhealthy"
    _, alerts = module_status(foreign_cluster_status(peer, "rome", False)["modules"]["networking"])
    assert alerts == ["The network connection with the foreign cluster is not working"]
    assert not virtual_node_healthy({"status": virtual_node_status(peer, up=False)})
