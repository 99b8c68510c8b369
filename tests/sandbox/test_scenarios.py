"""Scenario loading: the demo fleet's variety, the minimal fleet, the CLI, the generator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sandbox import Sandbox, scenarios
from sandbox.kinds import FOREIGN_CLUSTERS, NAMESPACE_OFFLOADINGS, NAMESPACES, NODES, VIRTUAL_NODES

ROOT = Path(__file__).resolve().parents[2]


def phases(sb: Sandbox) -> dict[str, str]:
    return {
        o["metadata"]["namespace"]: (o.get("status") or {}).get("offloadingPhase")
        for o in sb.store.items(NAMESPACE_OFFLOADINGS)
    }


def test_the_demo_scenario_has_every_interesting_state() -> None:
    with Sandbox(scenario="demo") as sb:
        sb.wait_idle(10)
        got = phases(sb)
        assert got["web-frontend"] == "Ready"
        assert got["analytics"] == "NoClusterSelected"
        assert got["checkout-prod"] == "SomeFailed"
        assert got["payments-prod"] == "AllFailed"
        assert got["search-prod"] == "InProgress"
        assert got["data-pipeline"] == "NoClusterSelected"
        user_namespaces = [n for n in sb.store.items(NAMESPACES) if "team" in (n["metadata"].get("labels") or {})]
        assert len(user_namespaces) >= 25
        florence = sb.store.get(FOREIGN_CLUSTERS, "", "florence")
        offloading = florence["status"]["modules"]["offloading"]
        assert any(c["status"] not in ("Ready", "Established") for c in offloading["conditions"])
        assert len(sb.store.items(VIRTUAL_NODES)) == 4
        virtual = [n for n in sb.store.items(NODES) if n["metadata"]["labels"].get("liqo.io/type") == "virtual-node"]
        assert {n["metadata"]["name"] for n in virtual} == {"milan", "florence", "naples", "turin"}
        turin = sb.store.get(NODES, "", "turin")
        assert turin["metadata"]["labels"]["staging"] == "true"
        assert {"key": "virtual-node.liqo.io/not-allowed", "value": "true", "effect": "NoExecute"} in turin["spec"][
            "taints"
        ]
        assert "payments-prod" in sb.remote_namespaces("milan")


def test_the_minimal_scenario_offloads_nothing() -> None:
    with Sandbox(scenario="minimal") as sb:
        assert sb.store.items(NAMESPACE_OFFLOADINGS) == []
        assert {n["metadata"]["name"] for n in sb.store.items(FOREIGN_CLUSTERS)} == {"milan", "florence"}


def test_a_scenario_can_be_a_file(tmp_path: Path) -> None:
    data = scenarios.load("minimal")
    data["namespaces"].append({"name": "from-a-file", "labels": {"team": "x"}})
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    with Sandbox(scenario=str(path)) as sb:
        assert sb.store.get(NAMESPACES, "", "from-a-file") is not None


def test_the_generator_builds_the_requested_fleet(tmp_path: Path) -> None:
    out = tmp_path / "big.yaml"
    subprocess.run(
        [sys.executable, "-m", "sandbox", "generate", "--namespaces", "300", "--clusters", "12", "-o", str(out)],
        check=True,
        cwd=ROOT,
    )
    data = yaml.safe_load(out.read_text())
    assert len(data["namespaces"]) == 300
    assert len(data["peers"]) == 12
    assert 5 < sum(1 for n in data["namespaces"] if "offloading" in n) < 80


def test_stop_ends_every_thread_and_open_connection(tmp_path: Path) -> None:
    import contextlib
    import threading
    import time

    from kubernetes import client, config, watch
    from urllib3.exceptions import ProtocolError

    from tests.fixtures.waits import wait_until

    before = set(threading.enumerate())
    with Sandbox(scenario="minimal") as sb:
        api_client = config.new_client_from_config(config_file=str(sb.write_kubeconfig(tmp_path / "kc")))
        core = client.CoreV1Api(api_client)
        watched: list[str] = []

        def watch_namespaces() -> None:
            # The stop may end the stream between chunks (a clean end) or inside one: both are an end.
            with contextlib.suppress(ProtocolError):
                for event in watch.Watch().stream(core.list_namespace, timeout_seconds=60):
                    watched.append(event["type"])

        stream = threading.Thread(target=watch_namespaces)
        stream.start()
        # The watch is open once it has delivered the current namespaces.
        wait_until(lambda: watched, 60, interval=0.02, message="the watch to start")

        hanging = threading.Event()
        decide = sb.faults.decide

        def decide_and_tell(method: str, path: str) -> tuple[float, str | None]:
            latency, action = decide(method, path)
            if action == "timeout":
                hanging.set()
            return latency, action

        sb.faults.decide = decide_and_tell  # type: ignore[method-assign]
        sb.faults.set(timeout_rate=1.0, timeout_seconds=60)

        def hang() -> None:
            with contextlib.suppress(Exception):  # the connection drops when the sandbox stops
                core.list_namespace(_request_timeout=30)

        hung = threading.Thread(target=hang, daemon=True)
        hung.start()
        # The server is holding the request (its handler waits for the stop or the 60 s).
        wait_until(hanging.is_set, 60, interval=0.02, message="the request to hang in the server")
    started = time.monotonic()
    stream.join(20)
    hung.join(20)
    # The stop ended both: the hanging request would otherwise last until its client's 30 s timeout and
    # the watch until its 60 s (a bound well below those, not a speed: a slow machine takes its time).
    assert time.monotonic() - started < 25
    assert not stream.is_alive() and not hung.is_alive()
    api_client.close()
    wait_until(lambda: not set(threading.enumerate()) - before, 60, interval=0.02, message="every thread to end")


@pytest.mark.parametrize(
    ("name", "offloaded"), [("generated:100x5", 11), ("generated:100x5@0.6", 57), ("generated:100x5@1", 100)]
)
def test_a_generated_fleet_takes_the_offloaded_fraction_after_an_at_sign(name: str, offloaded: int) -> None:
    from sandbox.scenarios import load

    fleet = load(name)
    assert len(fleet["namespaces"]) == 100
    assert sum(1 for ns in fleet["namespaces"] if ns.get("offloading")) == offloaded


def test_a_generated_fleet_offloads_a_share_on_every_peer_after_a_tilde() -> None:
    from sandbox.scenarios import load

    plain, wide = load("generated:100x5@0.6"), load("generated:100x5@0.6~0.9")
    # The same namespaces offloaded; about 90 % of them with no selector, the others as without ~.
    assert [bool(ns.get("offloading")) for ns in wide["namespaces"]] == [
        bool(ns.get("offloading")) for ns in plain["namespaces"]
    ]
    everywhere = [ns for ns in wide["namespaces"] if ns.get("offloading") == {"selector": []}]
    assert 45 <= len(everywhere) <= 56
    others = [(a, b) for a, b in zip(plain["namespaces"], wide["namespaces"], strict=True) if b not in everywhere]
    assert others and all(a == b for a, b in others)
    assert load("generated:100x5@0.6~0") == plain


def test_a_generated_fleet_refuses_a_fraction_above_one() -> None:
    from sandbox.scenarios import load

    with pytest.raises(FileNotFoundError):
        load("generated:100x5@1.5")


def test_a_generated_fleet_with_pods_binds_every_pod_where_its_namespace_allows() -> None:
    from liqo_rules import constants as c
    from sandbox.kinds import PODS

    fleet = scenarios.load("generated:40x3@0.5+2")
    assert [ns["pods"] for ns in fleet["namespaces"]] == [2] * 40
    with Sandbox(scenario=fleet) as sb:
        sb.wait_idle(10)
        pods = sb.store.items(PODS)
        assert len(pods) == 80
        offloaded = {o["metadata"]["namespace"] for o in sb.store.items(NAMESPACE_OFFLOADINGS)}
        pending = [p for p in pods if (p.get("status") or {}).get("phase") != "Running"]
        # Only a pod that Liqo keeps off the local nodes (Remote) with no selected peer may wait, and says why.
        assert {p["metadata"]["namespace"] for p in pending} <= offloaded
        assert all("0/4 nodes are available" in p["status"]["conditions"][0]["message"] for p in pending)
        assert len(pending) < 20
        virtual = {
            n["metadata"]["name"]
            for n in sb.store.items(NODES)
            if (n["metadata"].get("labels") or {}).get(c.VIRTUAL_NODE_TYPE_LABEL)
        }
        remote = [p for p in pods if p["spec"].get("nodeName") in virtual]
        assert remote, "some pods of offloaded namespaces run on virtual nodes"
        assert {p["metadata"]["namespace"] for p in remote} <= offloaded  # never a pod of another namespace
        # The room each node reports is what its pods request, however the scheduler kept its sums.
        per_node: dict[str, int] = {}
        for p in pods:
            if "nodeName" not in p["spec"]:
                continue
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
        assert sum(per_node.values()) == 80 - len(pending) and max(per_node.values()) <= 110
