"""The simulated controller groups its desiredMapping writes once the maps are large
(sandbox/liqo/desired.py): the state it converges to is the one it reaches writing each offloading's
entries alone, with far fewer writes of the maps; a peer whose map it may not patch still fails only
its own entries."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules import constants as c
from sandbox import Sandbox
from sandbox.kinds import NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS, NAMESPACES
from sandbox.liqo import desired

GROUP_FROM = desired.GROUP_FROM
COUNT = 160  # past GROUP_FROM entries per map
SPEC = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}


def _offload_all(sb: Sandbox, count: int) -> None:
    for i in range(count):
        sb.server.create(
            NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"g-{i:03d}"}}, manager="t"
        )
    sb.wait_idle(30)
    for i in range(count):
        body = {
            "apiVersion": "offloading.liqo.io/v1beta1",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "namespace": f"g-{i:03d}"},
            "spec": SPEC,
        }
        sb.server.create(NAMESPACE_OFFLOADINGS, f"g-{i:03d}", body, manager="t")
    sb.wait_idle(120)


def _state(sb: Sandbox) -> dict[str, Any]:
    offloadings = {}
    for obj in sb.store.items(NAMESPACE_OFFLOADINGS):
        status = obj.get("status") or {}
        conditions = status.get("remoteNamespacesConditions") or {}
        offloadings[obj["metadata"]["namespace"]] = (
            status.get("offloadingPhase"),
            status.get("remoteNamespaceName"),
            sorted((cluster, cond["type"], cond["status"]) for cluster, conds in conditions.items() for cond in conds),
            sorted(obj["metadata"].get("finalizers") or []),
        )
    maps = {
        nm["metadata"]["name"]: (
            (nm.get("spec") or {}).get("desiredMapping") or {},
            {k: v.get("phase") for k, v in ((nm.get("status") or {}).get("currentMapping") or {}).items()},
        )
        for nm in sb.store.items(NAMESPACE_MAPS)
    }
    labels = {
        ns["metadata"]["name"]: (ns["metadata"].get("labels") or {}).get(c.SCHEDULING_LABEL)
        for ns in sb.store.items(NAMESPACES)
    }
    return {"offloadings": offloadings, "maps": maps, "scheduling": labels}


def _converge(count: int, monkeypatch: pytest.MonkeyPatch, group_from: int) -> tuple[dict[str, Any], Any]:
    monkeypatch.setattr(desired, "GROUP_FROM", group_from)
    with Sandbox(scenario="minimal", controller_delay=0.0, port=0) as sb:
        _offload_all(sb, count)
        return _state(sb), sb.liqo.offloadings.writes


def test_grouped_writes_converge_to_the_state_of_one_write_each(monkeypatch: pytest.MonkeyPatch) -> None:
    alone, writes_alone = _converge(COUNT, monkeypatch, group_from=10**9)
    grouped, writes = _converge(COUNT, monkeypatch, group_from=GROUP_FROM)
    assert grouped == alone
    ready = [name for name, (phase, *_) in grouped["offloadings"].items() if name.startswith("g-") and phase == "Ready"]
    assert len(ready) == COUNT
    # Each map got an entry per offloading: alone one patch each, grouped far fewer once the maps were large.
    assert writes_alone.entries == writes.entries == 2 * COUNT
    assert writes_alone.groups == 2 * COUNT
    assert writes.groups < writes.entries


def test_a_map_it_may_not_patch_fails_only_its_own_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(desired, "GROUP_FROM", 0)  # every write grouped
    with Sandbox(scenario="minimal", controller_delay=0.0, port=0) as sb:
        sb.liqo.set_peer("milan", namespace_map_writable=False)
        _offload_all(sb, 20)
        state = _state(sb)
        swallowed = {ns for ns, message in sb.liqo.swallowed if "NamespaceMap milan" in message}
    assert swallowed == {f"g-{i:03d}" for i in range(20)}
    assert not any(name.startswith("g-") for name in state["maps"]["milan"][0])
    assert {f"g-{i:03d}" for i in range(20)} <= set(state["maps"]["florence"][0])
    assert all(state["offloadings"][f"g-{i:03d}"][0] == "Ready" for i in range(20))  # florence only, as Liqo
