"""The sandbox domain (issue 28): several clusters in one process, each on its own port and kubeconfig
context, peered in a mesh; an offload from one creates the twin in the other's API; faults per cluster.
Clients are the official kubernetes client over HTTP and kubectl, as for a single sandbox."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from liqo_rules import constants as c
from sandbox import domain
from sandbox.__main__ import main as sandbox_main
from sandbox.domain import Domain
from sandbox.kinds import NAMESPACES
from tests.sandbox.conftest import GROUP, NSOFF, VERSION, expr, selector

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
FOUR = "domain:rome,milan,naples,turin:provider"
MESH = "ConsumerAndProvider"


def http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll until `check` returns something truthy; its last answer otherwise fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer or time.monotonic() > deadline:
            assert answer, f"still {answer!r} after {timeout}s"
            return answer
        time.sleep(0.05)


class Cluster:
    """The kubernetes client bound to one context of the domain's kubeconfig."""

    def __init__(self, kubeconfig: Path, context: str) -> None:
        self.api_client = config.new_client_from_config(config_file=str(kubeconfig), context=context)
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)

    def namespace(self, name: str) -> Any:
        try:
            return self.core.read_namespace(name)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def namespaces(self) -> set[str]:
        return {ns.metadata.name for ns in self.core.list_namespace().items}

    def roles(self) -> dict[str, str]:
        items = self.custom.list_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters")["items"]
        return {fc["metadata"]["name"]: fc["status"]["role"] for fc in items}

    def offload(self, namespace: str, spec: dict[str, Any]) -> None:
        self.core.create_namespace({"metadata": {"name": namespace}})
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading"}
        body.update(metadata={"name": "offloading"}, spec=spec)
        self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, NSOFF, body)

    def phase(self, namespace: str) -> str | None:
        try:
            nsoff = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, NSOFF, "offloading")
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return (nsoff.get("status") or {}).get("offloadingPhase")


@pytest.fixture
def four(tmp_path: Path) -> Iterator[tuple[Domain, Path]]:
    with Domain(FOUR, controller_delay=0.0, port=0) as dom:
        yield dom, dom.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def clusters(four: tuple[Domain, Path]) -> Iterator[dict[str, Cluster]]:
    dom, kubeconfig = four
    bound = {name: Cluster(kubeconfig, name) for name in dom.names()}
    yield bound
    for cluster in bound.values():
        cluster.api_client.close()


# -- the grammar -----------------------------------------------------------------------------------
def test_the_grammar_names_clusters_counts_them_and_marks_provider_only_ones() -> None:
    spec = domain.load(FOUR)
    assert spec.names() == ["rome", "milan", "naples", "turin"]
    assert [cl.provider_only for cl in spec.clusters] == [False, False, False, True]
    assert domain.load("domain:3").names() == ["rome", "milan", "naples"]
    assert domain.load("domain:12").names()[-2:] == ["cluster-11", "cluster-12"]
    assert domain.is_domain(FOUR) and domain.is_domain({"domain": {"clusters": ["a"]}})
    assert not domain.is_domain("demo") and not domain.is_domain(ROOT / "sandbox/scenarios/demo.yaml")


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ("domain:rome,rome", "named twice"),
        ("domain:rome,Milan", "not a valid cluster name"),
        ("domain:rome,milan:consumer", "unknown flag"),
        ("domain:0", "1 to 20"),
        ("domain:", "not a valid cluster name"),
        ({"domain": {"clusters": [{"name": "rome", "peers": []}]}}, "the domain writes peers"),
        ({"domain": {"clusters": [{"name": "rome", "port": "8001"}]}}, "port must be"),
        ("domain:rome,milan/lots", "is not NxK"),
        ("domain:rome,cluster-0001/10x2", "share their name with generated peers"),
    ],
)
def test_the_grammar_refuses_what_it_cannot_serve(scenario: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        domain.load(scenario)


def test_the_yaml_form_gives_roles_labels_and_namespaces_per_cluster() -> None:
    path = ROOT / "sandbox/scenarios/domains/italy.yaml"
    assert domain.is_domain(path)
    spec = domain.load(path)
    assert spec.names() == ["rome", "milan", "naples", "turin"]
    turin = domain.cluster_scenario(spec, spec.clusters[3])
    assert {p["id"]: p["role"] for p in turin["peers"]} == {
        "rome": "Consumer",
        "milan": "Consumer",
        "naples": "Consumer",
    }
    naples = domain.cluster_scenario(spec, spec.clusters[2])
    assert {p["id"]: p["role"] for p in naples["peers"]} == {"rome": MESH, "milan": MESH, "turin": "Provider"}
    assert [ns["name"] for ns in naples["namespaces"]] == ["checkout", "batch", "reporting"]
    milan = next(p for p in naples["peers"] if p["id"] == "milan")
    assert milan["labels"][c.CLUSTER_PROVIDER_LABEL] == "eks"


# -- a running domain ------------------------------------------------------------------------------
@pytest.mark.sandbox
def test_each_cluster_has_its_port_and_context_and_sees_the_others_with_their_roles(
    four: tuple[Domain, Path], clusters: dict[str, Cluster]
) -> None:
    dom, kubeconfig = four
    document = yaml.safe_load(kubeconfig.read_text())
    assert [ctx["name"] for ctx in document["contexts"]] == ["rome", "milan", "naples", "turin"]
    assert document["current-context"] == "rome"
    servers = {entry["name"]: entry["cluster"]["server"] for entry in document["clusters"]}
    assert servers == {name: dom[name].url for name in dom.names()}
    assert len({dom[name].port for name in dom.names()}) == 4
    assert clusters["rome"].roles() == {"milan": MESH, "naples": MESH, "turin": "Provider"}
    assert clusters["milan"].roles() == {"rome": MESH, "naples": MESH, "turin": "Provider"}
    assert clusters["turin"].roles() == {"rome": "Consumer", "milan": "Consumer", "naples": "Consumer"}
    # the demo data: rome offloads web to milan, api everywhere, ml-rome (EnforceSameName) to turin
    assert {"web", "api", "ml-rome", "batch"} <= clusters["rome"].namespaces()
    assert {clusters["rome"].phase(ns) for ns in ("web", "api", "ml-rome")} == {"Ready"}
    assert {"web-rome", "api-rome", "api-naples", "ml-naples"} <= clusters["milan"].namespaces()
    assert {"api-rome", "api-milan", "api-naples", "ml-rome", "web-naples"} <= clusters["turin"].namespaces()
    assert "web-rome" not in clusters["naples"].namespaces()
    twin = clusters["milan"].namespace("web-rome").metadata
    assert twin.labels[c.REMOTE_CLUSTER_ID_LABEL] == "rome"
    assert twin.annotations[c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION] == "liqo-tenant-rome/milan"
    assert twin.annotations[c.ORIGINAL_NAME_ANNOTATION] == "web"
    # each says its cluster id as a Liqo install does (liqoctl info and the dashboard read it by its label)
    for name, cluster in clusters.items():
        found = cluster.core.list_namespaced_config_map(
            "liqo", label_selector="app.kubernetes.io/name=clusterid-configmap"
        )
        assert [cm.data["CLUSTER_ID"] for cm in found.items] == [name]


@pytest.mark.sandbox
def test_an_offload_creates_the_twin_in_the_providers_api_and_its_deletion_removes_it(
    clusters: dict[str, Cluster],
) -> None:
    rome, milan, naples = clusters["rome"], clusters["milan"], clusters["naples"]
    before = naples.core.list_namespace()  # the resourceVersion a watcher of naples would start from
    rome.offload("shop", {"clusterSelector": selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "naples")])})
    twin = eventually(lambda: naples.namespace("shop-rome"))
    assert twin.metadata.labels[c.REMOTE_CLUSTER_ID_LABEL] == "rome"
    assert twin.metadata.annotations[c.ORIGINAL_NAME_ANNOTATION] == "shop"
    assert int(twin.metadata.resource_version) > int(before.metadata.resource_version)
    assert eventually(lambda: rome.phase("shop") == "Ready")
    assert "shop-rome" not in milan.namespaces()
    # naples' ForeignCluster for rome shows rome as a consumer (and provider) of naples
    assert naples.roles()["rome"] == MESH

    rome.custom.delete_namespaced_custom_object(GROUP, VERSION, "shop", NSOFF, "offloading")
    eventually(lambda: naples.namespace("shop-rome") is None)
    eventually(lambda: rome.phase("shop") is None)


def _pods(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return {pod.metadata.name: pod for pod in cluster.core.list_namespaced_pod(namespace).items}


def _bound(pods: dict[str, Any], count: int) -> dict[str, Any]:
    """``pods`` once there are ``count`` of them, each bound to a node (the scheduler binds after the
    create); empty before."""
    return pods if len(pods) == count == sum(1 for pod in pods.values() if pod.spec.node_name) else {}


def _started(pods: dict[str, Any], count: int) -> dict[str, Any]:
    """``pods`` once there are ``count`` of them, each bound to a node and Running; empty before."""
    running = {name: pod for name, pod in pods.items() if pod.status and pod.status.phase == "Running"}
    return pods if _bound(running, count) and len(pods) == count else {}


@pytest.mark.sandbox
def test_a_pod_on_the_virtual_node_runs_in_the_twin_and_leaves_with_it(clusters: dict[str, Cluster]) -> None:
    rome, naples = clusters["rome"], clusters["naples"]
    spec = {
        "podOffloadingStrategy": "Remote",
        "clusterSelector": selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "naples")]),
    }
    rome.offload("jobs", spec)
    eventually(lambda: rome.phase("jobs") == "Ready")
    container = {"name": "job", "image": "busybox:1.36"}
    for name in ("job-1", "job-2"):
        body = {"metadata": {"name": name, "labels": {"app": "jobs"}}, "spec": {"containers": [container]}}
        rome.core.create_namespaced_pod("jobs", body)
    local = eventually(lambda: _bound(_pods(rome, "jobs"), 2))
    assert {pod.spec.node_name for pod in local.values()} == {"naples"}  # the virtual node
    # a reflected pod is created unscheduled and without a status; naples' scheduler and kubelet write them
    remote = eventually(lambda: _started(_pods(naples, "jobs-rome"), 2))
    job = remote["job-1"]
    assert job.metadata.labels == {
        "app": "jobs",
        "liqo.io/origin-cluster-id": "rome",
        "offloading.liqo.io/nodename": "naples",
    }
    assert job.spec.node_name.startswith("naples-worker-")
    assert remote["job-1"].status.phase == "Running"

    rome.core.delete_namespaced_pod("job-1", "jobs")
    eventually(lambda: set(_pods(naples, "jobs-rome")) == {"job-2"})
    # unoffloading: the twin goes, with the pod it still holds (naples' namespace controller empties it)
    rome.custom.delete_namespaced_custom_object(GROUP, VERSION, "jobs", NSOFF, "offloading")
    eventually(lambda: naples.namespace("jobs-rome") is None)
    assert "jobs-rome" not in {pod.metadata.namespace for pod in naples.core.list_pod_for_all_namespaces().items}
    # rome's other reflected pods stay where they run (ml-rome's, in turin)
    turin = clusters["turin"].core.list_namespaced_pod("ml-rome", label_selector="liqo.io/origin-cluster-id=rome")
    assert len(turin.items) == 2


@pytest.mark.sandbox
def test_enforce_same_name_collides_with_the_providers_own_namespace(clusters: dict[str, Cluster]) -> None:
    rome, milan = clusters["rome"], clusters["milan"]
    milan.core.create_namespace({"metadata": {"name": "reports", "labels": {"owner": "milan"}}})
    spec = {
        "namespaceMappingStrategy": "EnforceSameName",
        "clusterSelector": selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "milan")]),
    }
    rome.offload("reports", spec)
    assert eventually(lambda: rome.phase("reports") == "AllFailed")
    nm = rome.custom.get_namespaced_custom_object(GROUP, VERSION, "liqo-tenant-milan", "namespacemaps", "milan")
    assert nm["status"]["currentMapping"]["reports"]["phase"] == "CreationLoopBackOff"
    mine = milan.namespace("reports").metadata
    assert mine.labels["owner"] == "milan" and c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION not in (mine.annotations or {})


def _api_server_condition(cluster: Cluster, peer: str) -> str:
    fc = cluster.custom.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", peer)
    return str(next(cond["status"] for cond in fc["status"]["conditions"] if cond["type"] == "APIServerStatus"))


@pytest.mark.sandbox
def test_one_cluster_down_while_the_others_answer_and_see_it_unreachable(
    four: tuple[Domain, Path], clusters: dict[str, Cluster]
) -> None:
    dom = four[0]
    rome, naples = clusters["rome"], clusters["naples"]
    assert http(dom["milan"].url + "/sandbox/faults", "PATCH", {"outage": True})[0] == 200
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(dom["milan"].url + "/api/v1/namespaces", timeout=5)
    assert "web" in rome.namespaces()  # rome keeps answering
    eventually(lambda: _api_server_condition(rome, "milan") == "Error")
    eventually(lambda: _api_server_condition(naples, "milan") == "Error")
    assert _api_server_condition(rome, "naples") == "Established"
    status, described = http(dom["rome"].url + "/sandbox/domain")
    by_name = {entry["name"]: entry for entry in described["clusters"]}
    assert status == 200 and described["cluster"] == "rome"
    assert by_name["rome"]["unreachablePeers"] == ["milan"] and by_name["milan"]["faults"]["outage"] is True
    assert by_name["rome"]["faults"]["peer_down"] == []  # rome's own settings are untouched
    # while milan is out, an offload from rome to milan does not converge there
    rome.offload("late", {"clusterSelector": selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "milan")])})
    time.sleep(0.3)
    assert "late-rome" not in {ns["metadata"]["name"] for ns in dom["milan"].store.items(NAMESPACES)}

    http(dom["milan"].url + "/sandbox/faults", "DELETE")
    eventually(lambda: _api_server_condition(rome, "milan") == "Established")
    eventually(lambda: clusters["milan"].namespace("late-rome"))


@pytest.mark.sandbox
def test_the_domain_endpoint_sets_the_faults_of_any_cluster(four: tuple[Domain, Path]) -> None:
    dom = four[0]
    status, body = http(
        dom["rome"].url + "/sandbox/domain", "PATCH", {"cluster": "naples", "faults": {"error_rate": 1.0}}
    )
    assert status == 200
    assert {e["name"]: e["faults"]["error_rate"] for e in body["clusters"]} == {
        "rome": 0.0,
        "milan": 0.0,
        "naples": 1.0,
        "turin": 0.0,
    }
    assert http(dom["naples"].url + "/api/v1/namespaces")[0] == 500
    assert http(dom["rome"].url + "/api/v1/namespaces")[0] == 200
    assert http(dom["turin"].url + "/sandbox/domain", "DELETE")[0] == 200
    assert http(dom["naples"].url + "/api/v1/namespaces")[0] == 200
    assert http(dom["rome"].url + "/sandbox/domain", "PATCH", {"cluster": "genoa", "faults": {}})[0] == 400


@pytest.mark.sandbox
@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
def test_kubectl_reaches_each_cluster_by_its_context(four: tuple[Domain, Path], tmp_path: Path) -> None:
    kubeconfig = four[1]

    def kubectl(*args: str) -> Any:
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), *args, "-o", "json"],
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(tmp_path)},
            timeout=60,
            check=True,
        )
        return json.loads(result.stdout)

    twin = kubectl("--context", "milan", "get", "namespace", "web-rome")
    assert twin["metadata"]["labels"][c.REMOTE_CLUSTER_ID_LABEL] == "rome"
    roles = {
        fc["metadata"]["name"]: fc["status"]["role"]
        for fc in kubectl("--context", "turin", "get", "foreignclusters")["items"]
    }
    assert roles == {"rome": "Consumer", "milan": "Consumer", "naples": "Consumer"}
    names = {ns["metadata"]["name"] for ns in kubectl("get", "namespaces")["items"]}  # the current context: rome
    assert "api-milan" in names and "web-rome" not in names


@pytest.mark.sandbox
def test_serve_runs_a_domain_and_faults_addresses_a_cluster_by_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "domain.kubeconfig"
    command = [sys.executable, "-m", "sandbox", "serve", "--port", "0", "--scenario", "domain:rome,milan:provider"]
    proc = subprocess.Popen(
        [*command, "--kubeconfig", str(kubeconfig)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(2)]
        assert [line.split(" listening on ")[0] for line in lines] == ["sandbox rome", "sandbox milan"]
        urls = {line.split()[1]: line.rsplit(" ", 1)[1] for line in lines}
        document = yaml.safe_load(kubeconfig.read_text())
        assert {e["name"]: e["cluster"]["server"] for e in document["clusters"]} == urls
        assert (
            sandbox_main(["faults", "--kubeconfig", str(kubeconfig), "--context", "milan", "--set", "latency=0.2"]) == 0
        )
        assert json.loads(capsys.readouterr().out)["latency"] == 0.2
        assert http(urls["milan"] + "/sandbox/faults")[1]["latency"] == 0.2
        assert http(urls["rome"] + "/sandbox/faults")[1]["latency"] == 0.0
        peers = http(urls["milan"] + "/sandbox/domain")[1]["clusters"]
        assert [(e["name"], e["peers"]) for e in peers] == [
            ("rome", {"milan": "Provider"}),
            ("milan", {"rome": "Consumer"}),
        ]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


@pytest.mark.sandbox
def test_a_domain_restarts_from_a_state_file_per_cluster(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with Domain("domain:rome,milan", state_file=state) as dom:
        rome = Cluster(dom.write_kubeconfig(tmp_path / "kubeconfig"), "rome")
        rome.offload("keep", {"clusterSelector": selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "milan")])})
        dom.wait_idle(10)
        rome.api_client.close()
    assert sorted(p.name for p in tmp_path.glob("state-*.json")) == ["state-milan.json", "state-rome.json"]
    with Domain("domain:rome,milan", state_file=state) as dom:
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig")
        rome, milan = Cluster(kubeconfig, "rome"), Cluster(kubeconfig, "milan")
        dom.wait_idle(10)
        assert rome.phase("keep") == "Ready"
        twin = milan.namespace("keep-rome")
        assert twin.metadata.annotations[c.MANAGED_BY_NAMESPACE_MAP_ANNOTATION] == "liqo-tenant-rome/milan"
        # still linked after the restart: unoffloading removes the twin from milan
        rome.custom.delete_namespaced_custom_object(GROUP, VERSION, "keep", NSOFF, "offloading")
        eventually(lambda: milan.namespace("keep-rome") is None)
        for cluster in (rome, milan):
            cluster.api_client.close()


@pytest.mark.sandbox
def test_ports_follow_the_first_and_skip_one_that_is_taken() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        first = probe.getsockname()[1]
    with socket.socket() as taken:
        with contextlib.suppress(OSError):  # taken by someone else already: skipped all the same
            taken.bind(("127.0.0.1", first + 1))
        with Domain("domain:rome,milan,naples", port=first) as dom:
            assert dom["rome"].port == first
            assert dom["milan"].port != first + 1
            assert len({dom[name].port for name in dom.names()}) == 3
            assert http(dom["milan"].url + "/sandbox/domain")[1]["cluster"] == "milan"


@pytest.mark.sandbox
def test_a_generated_fleet_in_every_cluster_adds_namespaces_and_simulated_peers(tmp_path: Path) -> None:
    spec = domain.load("domain:rome,milan,turin:provider/30x3@0.5")
    assert [cluster.generated for cluster in spec.clusters] == ["30x3@0.5"] * 3
    with Domain(spec) as dom:
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig")
        rome, turin = Cluster(kubeconfig, "rome"), Cluster(kubeconfig, "turin")
        generated = {"cluster-0000": "Provider", "cluster-0001": "Provider", "cluster-0002": "Provider"}
        assert rome.roles() == {"milan": MESH, "turin": "Provider", **generated}
        assert turin.roles() == {"rome": "Consumer", "milan": "Consumer"}  # provider-only: no peers of its own
        assert len([ns for ns in rome.namespaces() if ns.endswith(tuple(f"-{i:05d}" for i in range(30)))]) == 30
        offloaded = rome.custom.list_cluster_custom_object(GROUP, VERSION, NSOFF)["items"]
        assert len(offloaded) > 5 and not turin.custom.list_cluster_custom_object(GROUP, VERSION, NSOFF)["items"]
        for cluster in (rome, turin):
            cluster.api_client.close()


@pytest.mark.sandbox
def test_the_italy_domain_offloads_by_region_and_collides_on_names_the_providers_use(tmp_path: Path) -> None:
    with Domain(ROOT / "sandbox/scenarios/domains/italy.yaml") as dom:
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig")
        bound = {name: Cluster(kubeconfig, name) for name in dom.names()}
        # checkout goes to the clusters of eu-south-1 by their labels: rome and milan, not turin
        assert bound["naples"].phase("checkout") == "Ready"
        assert [name for name in ("rome", "milan", "turin") if bound[name].namespace("checkout-naples")] == [
            "rome",
            "milan",
        ]
        # batch with EnforceSameName: rome and milan have their own batch, turin takes naples' twin
        assert bound["naples"].phase("batch") == "SomeFailed"
        assert bound["turin"].namespace("batch").metadata.labels[c.REMOTE_CLUSTER_ID_LABEL] == "naples"
        assert c.REMOTE_CLUSTER_ID_LABEL not in bound["rome"].namespace("batch").metadata.labels
        for cluster in bound.values():
            cluster.api_client.close()
