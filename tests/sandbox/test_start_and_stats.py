"""The phased start of a large fleet converges to what the controllers reach one change at a time, and
the sandbox counts the bytes it serves per client."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from liqo_rules import constants as c
from sandbox import Sandbox, scenarios
from sandbox.kinds import NAMESPACE_MAPS, NAMESPACE_OFFLOADINGS, NAMESPACES
from tests.sandbox.conftest import Clients


def _converged(sb: Sandbox) -> dict[str, Any]:
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


def test_the_phased_start_reaches_the_state_of_one_change_at_a_time() -> None:
    data = scenarios.generate(300, 12, offloaded=0.3, seed=7)
    with Sandbox(scenario=data, controller_delay=0.0, port=0) as phased:
        started = _converged(phased)
    assert len(started["offloadings"]) > 50
    assert any(phase == "Ready" for phase, *_ in started["offloadings"].values())
    assert any(desired for desired, _ in started["maps"].values())

    empty = dict(data, namespaces=[])
    with Sandbox(scenario=empty, controller_delay=0.0, port=0) as stepwise:
        scenarios.apply_namespaces(data, stepwise.server)
        stepwise.wait_idle(60)
        assert _converged(stepwise) == started


def _admin(sb: Sandbox, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(f"{sb.url}/sandbox/stats", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        return dict(json.loads(response.read()))


def test_stats_count_the_bytes_served_per_client(kube: Clients, tmp_path: Path) -> None:
    _admin(kube.sb, "DELETE")
    listed = kube.core.list_namespace(_preload_content=False)
    body = listed.data
    stats = _admin(kube.sb)
    admin = stats["clients"]["sandbox-admin"]
    assert admin["requests"] == 1
    assert len(body) < admin["bytes"] < len(body) + 2000  # the body plus its headers
    assert stats["total_bytes"] >= admin["bytes"]

    other = Clients(kube.sb, kube.sb.write_kubeconfig(tmp_path / "viewer", user="viewer"))
    try:
        other.core.list_namespace()
    finally:
        other.api_client.close()
    stats = _admin(kube.sb)
    assert stats["clients"]["viewer"]["bytes"] > 0
    assert stats["clients"]["sandbox-admin"] == admin

    assert _admin(kube.sb, "DELETE")["clients"] == {}


def test_a_generated_fleet_needs_no_file() -> None:
    assert scenarios.load("generated:30x2") == scenarios.generate(30, 2)
