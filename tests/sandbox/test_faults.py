"""Fault injection, in-process and over HTTP, and the CLI server driven from another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from sandbox import Sandbox
from sandbox.kinds import NAMESPACE_OFFLOADINGS
from tests.sandbox.conftest import GROUP, NSOFF, VERSION, Clients, expr, selector

ROOT = Path(__file__).resolve().parents[2]


def http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_latency_is_added_to_every_request(kube: Clients) -> None:
    # A latency well above what a plain request takes on a slow, busy machine, so that "cleared" is told
    # apart from "still added" by the clock without a race.
    kube.sb.faults.set(latency=1.5)
    start = time.monotonic()
    kube.core.list_namespace()
    assert time.monotonic() - start >= 1.5
    kube.sb.faults.clear()
    start = time.monotonic()
    kube.core.list_namespace()
    assert time.monotonic() - start < 1.5


def test_error_rate_answers_500_with_a_status_body(kube: Clients) -> None:
    kube.sb.faults.set(error_rate=1.0)
    with pytest.raises(ApiException) as exc:
        kube.core.list_namespace()
    assert exc.value.status == 500 and json.loads(exc.value.body)["reason"] == "InternalError"
    kube.sb.faults.set(error_rate=0.5, seed=7)
    outcomes = []
    for _ in range(40):
        try:
            kube.core.read_namespace("alpha")
            outcomes.append(True)
        except ApiException:
            outcomes.append(False)
    assert 5 < outcomes.count(False) < 35


def test_max_inflight_answers_429_with_retry_after_beyond_the_limit(kube: Clients) -> None:
    from concurrent.futures import ThreadPoolExecutor

    kube.sb.faults.set(max_inflight=2, latency=0.3)

    def create(name: str) -> int | tuple[int, str | None, str]:
        try:
            kube.core.create_namespace({"metadata": {"name": name}})
            return 201
        except ApiException as exc:
            return exc.status, (exc.headers or {}).get("Retry-After"), json.loads(exc.body)["reason"]

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(create, [f"throttled-{i}" for i in range(6)]))
    assert outcomes.count(201) == 2, outcomes
    assert [o for o in outcomes if o != 201] == [(429, "1", "TooManyRequests")] * 4
    assert kube.sb.faults.throttled == 4
    # The official client (urllib3) retries a throttled GET itself after Retry-After.
    with ThreadPoolExecutor(4) as pool:
        started = time.monotonic()
        names = list(pool.map(lambda _: kube.core.read_namespace("alpha").metadata.name, range(4)))
    assert names == ["alpha"] * 4 and time.monotonic() - started >= 1.0 and kube.sb.faults.throttled == 6
    kube.sb.faults.set(max_inflight=0)
    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(create, [f"free-{i}" for i in range(6)])) == [201] * 6
    with pytest.raises(ValueError):
        kube.sb.faults.set(max_inflight=-1)


def test_conflict_rate_forces_409_on_writes_only(kube: Clients) -> None:
    kube.create_nsoff("alpha")
    kube.sb.faults.set(conflict_rate=1.0)
    kube.get_nsoff("alpha")
    with pytest.raises(ApiException) as exc:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, "alpha", NSOFF, "offloading", {"metadata": {"labels": {"a": "b"}}}
        )
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "Conflict"


def test_outage_drops_connections_until_cleared(kube: Clients) -> None:
    kube.sb.faults.set(outage=True)
    with pytest.raises(urllib3.exceptions.HTTPError):
        kube.core.list_namespace(_request_timeout=2)
    code, body = http(kube.sb.url + "/sandbox/faults")  # the admin endpoint keeps working
    assert code == 200 and body["outage"] is True
    kube.sb.faults.clear()
    assert kube.core.list_namespace().items


def test_timeouts_hang_until_the_client_gives_up(kube: Clients) -> None:
    kube.sb.faults.set(timeout_rate=1.0, timeout_seconds=30)
    start = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError):
        kube.core.list_namespace(_request_timeout=0.5)
    # The client gave up after its 0.5 s, long before the server's 30 s (however slow the machine).
    assert 0.5 <= time.monotonic() - start < 20
    kube.sb.faults.set(timeout_rate=0.0, path_contains="/nodes", error_rate=1.0)
    kube.core.list_namespace()
    with pytest.raises(ApiException):
        kube.core.list_node()


def test_a_peer_going_down_stalls_its_namespaces_and_shows_on_its_objects(kube: Clients) -> None:
    kube.sb.faults.set(peer_down="milan")
    kube.sb.wait_idle(10)
    fc = kube.custom.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", "milan")
    assert fc["status"]["conditions"][0]["status"] == "Error"
    ready = next(c for c in kube.core.read_node("milan").status.conditions if c.type == "Ready")
    assert ready.status == "Unknown"
    kube.create_nsoff("alpha", {"clusterSelector": selector([expr("liqo.io/provider", "In", "eks", "gke")])})
    kube.sb.wait_idle(10)
    obj = kube.get_nsoff("alpha")
    assert obj["status"]["offloadingPhase"] == "InProgress"
    assert obj["status"]["remoteNamespacesConditions"]["milan"][1]["reason"] == "Creating"
    assert "alpha-rome" not in kube.sb.remote_namespaces("milan")
    kube.sb.faults.clear()
    kube.sb.wait_idle(10)
    assert kube.get_nsoff("alpha")["status"]["offloadingPhase"] == "Ready"
    fc = kube.custom.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", "milan")
    assert fc["status"]["conditions"][0]["status"] == "Established"


def test_faults_over_http(kube: Clients) -> None:
    url = kube.sb.url + "/sandbox/faults"
    code, body = http(url, "PUT", {"error_rate": 1.0, "peer_down": ["florence"]})
    assert code == 200 and body["error_rate"] == 1.0 and body["peer_down"] == ["florence"]
    assert kube.sb.faults.peer_is_down("florence")
    with pytest.raises(ApiException):
        kube.core.list_namespace()
    code, body = http(url, "PUT", {"latency": 0.01})  # PUT replaces: error_rate back to 0
    assert body["error_rate"] == 0.0 and body["peer_down"] == []
    assert kube.core.list_namespace().items
    code, body = http(url, "PUT", {"nonsense": 1})
    assert code == 400
    code, body = http(url, "DELETE")
    assert body["latency"] == 0.0


def test_the_cli_server_writes_a_kubeconfig_and_takes_faults_over_http(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "serve",
            "--port",
            "0",
            "--scenario",
            "minimal",
            "--kubeconfig",
            str(kubeconfig),
            "--state-file",
            str(state),
            "--controller-delay",
            "0.1",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("sandbox listening on http://127.0.0.1:")
        url = line.rsplit(" ", 1)[1]
        api_client = config.new_client_from_config(config_file=str(kubeconfig))
        core = client.CoreV1Api(api_client)
        assert {n.metadata.name for n in core.list_namespace().items} >= {"alpha", "beta"}
        code, _ = http(url + "/sandbox/faults", "PUT", {"error_rate": 1.0})
        assert code == 200
        with pytest.raises(ApiException):
            core.list_namespace()
        http(url + "/sandbox/faults", "DELETE")
        cli = subprocess.run(
            [sys.executable, "-m", "sandbox", "faults", "--url", url, "--set", "latency=0.25", "peer_down=milan"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(cli.stdout)["peer_down"] == ["milan"]
        assert http(url + "/sandbox/faults")[1]["latency"] == 0.25
        subprocess.run(
            [sys.executable, "-m", "sandbox", "faults", "--url", url, "--clear"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        core.patch_namespace("alpha", {"metadata": {"labels": {"persisted": "yes"}}})
        api_client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    assert '"persisted":"yes"' in state.read_text()


def test_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with Sandbox(scenario="minimal", state_file=state) as sb:
        kube = Clients(sb, sb.write_kubeconfig(tmp_path / "kc"))
        created = kube.create_nsoff("alpha")
        sb.wait_idle(10)
        revision = sb.store.revision
        kube.api_client.close()
    with Sandbox(scenario="demo", state_file=state) as sb:  # the state file wins over the scenario
        obj = sb.store.get(NAMESPACE_OFFLOADINGS, "alpha", "offloading")
        assert obj["metadata"]["uid"] == created["metadata"]["uid"]
        assert obj["status"]["offloadingPhase"] == "Ready"
        assert "alpha-rome" in sb.remote_namespaces("milan")
        assert sb.store.revision >= revision
        assert sb.store.get(NAMESPACE_OFFLOADINGS, "web-frontend", "offloading") is None


def test_controller_down_freezes_the_status_until_it_is_back(kube: Clients) -> None:
    kube.create_nsoff("alpha", {"clusterSelector": selector([expr("liqo.io/provider", "In", "eks")])})
    kube.sb.wait_idle(10)
    code, body = http(kube.sb.url + "/sandbox/faults", "PATCH", {"controller_down": True})
    assert code == 200 and body["controller_down"] is True
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "offloading", {"spec": {"podOffloadingStrategy": "Remote"}}
    )
    kube.create_nsoff("beta")
    kube.sb.wait_idle(10)
    alpha = kube.get_nsoff("alpha")
    assert (alpha["metadata"]["generation"], alpha["status"]["observedGeneration"]) == (2, 1)
    assert "status" not in kube.get_nsoff("beta") and not kube.get_nsoff("beta")["metadata"].get("finalizers")
    assert http(kube.sb.url + "/sandbox/faults", "PATCH", {"controller_down": "yes"})[0] == 400
    kube.sb.faults.set(controller_down=False)
    kube.sb.wait_idle(10)
    assert kube.get_nsoff("alpha")["status"]["observedGeneration"] == 2
    assert kube.get_nsoff("beta")["status"]["offloadingPhase"] == "Ready"


def test_peers_over_http_take_a_name_and_turn_the_offloading_module_unhealthy(kube: Clients) -> None:
    url = kube.sb.url + "/sandbox/peers"
    code, body = http(url, "PATCH", {"cluster": "milan", "namespaces": ["alpha-rome"], "offloadingHealthy": False})
    assert code == 200 and "alpha-rome" in body["milan"]
    kube.sb.wait_idle(10)
    fc = kube.custom.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", "milan")
    assert {c["status"] for c in fc["status"]["modules"]["offloading"]["conditions"]} == {"NotReady"}
    kube.create_nsoff("alpha", {"clusterSelector": selector([expr("liqo.io/provider", "In", "eks")])})
    kube.sb.wait_idle(10)
    obj = kube.get_nsoff("alpha")
    assert obj["status"]["offloadingPhase"] == "AllFailed"
    assert obj["status"]["remoteNamespacesConditions"]["milan"][1]["reason"] == "CreationLoopBackOff"
    assert http(url, "PATCH", {"cluster": "milan", "offloadingHealthy": True})[0] == 200
    kube.sb.wait_idle(10)
    fc = kube.custom.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", "milan")
    assert {c["status"] for c in fc["status"]["modules"]["offloading"]["conditions"]} == {"Ready"}
    for bad in (
        {"cluster": "nowhere"},
        {"cluster": "milan", "offloadingHealthy": "no"},
        {"namespaces": ["x"]},
        {"cluster": "milan", "surprise": 1},
        {"cluster": "milan", "namespaces": "x"},
    ):
        code, body = http(url, "PATCH", bad)
        assert code == 400 and body["error"], bad
    assert http(url, "DELETE")[0] == 405
