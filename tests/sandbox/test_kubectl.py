"""kubectl (the real binary) as a second client of the sandbox."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from sandbox import Sandbox
from tests.sandbox.conftest import Clients

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
pytestmark = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")


class Kubectl:
    def __init__(self, sb: Sandbox, home: Path) -> None:
        self.kubeconfig = sb.write_kubeconfig(home / "kubeconfig")
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(self.kubeconfig)}
        self.cache = home / "cache"

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result


@pytest.fixture
def kubectl(sandbox: Sandbox, tmp_path: Path) -> Kubectl:
    return Kubectl(sandbox, tmp_path)


MANIFEST = """
apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceOffloading
metadata:
  name: offloading
  namespace: alpha
spec:
  namespaceMappingStrategy: DefaultName
  podOffloadingStrategy: LocalAndRemote
  clusterSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - key: topology.kubernetes.io/region
        operator: In
        values: [eu-south-1]
"""


def test_get_lists_namespaces_nodes_and_liqo_resources_as_tables(kubectl: Kubectl) -> None:
    out = kubectl("get", "namespaces").stdout
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert any(line.split()[:2] == ["alpha", "Active"] for line in out.splitlines())
    nodes = kubectl("get", "nodes", "-L", "liqo.io/remote-cluster-id").stdout
    assert any(line.startswith("milan ") and line.rstrip().endswith("milan") for line in nodes.splitlines())
    fcs = kubectl("get", "fc").stdout
    assert fcs.splitlines()[0].split() == ["NAME", "ROLE", "AGE"]
    assert "florence" in fcs
    vns = kubectl("get", "vn", "-A").stdout
    assert "liqo-tenant-milan" in vns
    maps = kubectl("get", "nsmap", "-A", "-o", "name").stdout.split()
    assert sorted(maps) == ["namespacemap.offloading.liqo.io/florence", "namespacemap.offloading.liqo.io/milan"]
    labelled = kubectl("get", "ns", "-l", "team in (payments,search)", "-o", "name").stdout.split()
    assert labelled == ["namespace/alpha", "namespace/beta"]


def test_apply_get_yaml_describe_label_patch_and_delete(kubectl: Kubectl, kube: Clients) -> None:
    applied = kubectl("apply", "--validate=false", "-f", "-", stdin=MANIFEST)
    assert "namespaceoffloading.offloading.liqo.io/offloading created" in applied.stdout
    kube.sb.wait_idle(10)
    table = kubectl("get", "nsoff", "-n", "alpha").stdout.splitlines()
    assert table[0].split() == ["NAME", "NAMESPACEMAPPINGSTRATEGY", "PODOFFLOADINGSTRATEGY", "OFFLOADINGPHASE", "AGE"]
    assert table[1].split()[:4] == ["offloading", "DefaultName", "LocalAndRemote", "Ready"]
    wide = kubectl("get", "nsoff", "-n", "alpha", "-o", "wide").stdout
    assert "alpha-rome" in wide  # RemoteNamespaceName is a priority-10 column
    obj = yaml.safe_load(kubectl("get", "nsoff", "-n", "alpha", "offloading", "-o", "yaml").stdout)
    assert obj["status"]["remoteNamespaceName"] == "alpha-rome"
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    described = kubectl("describe", "nsoff", "-n", "alpha", "offloading").stdout
    assert "Offloading Phase:" in described and "NamespaceCreated" in described

    changed = MANIFEST.replace("LocalAndRemote", "Remote")
    reapplied = kubectl("apply", "--validate=false", "-f", "-", stdin=changed)
    assert "configured" in reapplied.stdout
    assert "more restrictive setting" in reapplied.stderr  # the webhook's Warning header
    assert kube.get_nsoff("alpha")["spec"]["podOffloadingStrategy"] == "Remote"

    kubectl("label", "nsoff", "-n", "alpha", "offloading", "owner=carol")
    assert kube.get_nsoff("alpha")["metadata"]["labels"]["owner"] == "carol"
    kubectl("label", "namespace", "beta", "tier=gold")
    assert kube.core.read_namespace("beta").metadata.labels["tier"] == "gold"
    kubectl(
        "patch",
        "nsoff",
        "-n",
        "alpha",
        "offloading",
        "--type",
        "merge",
        "-p",
        '{"spec":{"podOffloadingStrategy":"LocalAndRemote"}}',
    )
    assert kube.get_nsoff("alpha")["spec"]["podOffloadingStrategy"] == "LocalAndRemote"
    kubectl(
        "patch",
        "nsoff",
        "-n",
        "alpha",
        "offloading",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/clusterSelector/nodeSelectorTerms","value":[]}]',
    )
    kube.sb.wait_idle(10)
    assert set(kube.get_nsoff("alpha")["status"]["remoteNamespacesConditions"]) == {"milan", "florence"}

    denied = kubectl(
        "patch",
        "nsoff",
        "-n",
        "alpha",
        "offloading",
        "--type",
        "merge",
        "-p",
        '{"spec":{"namespaceMappingStrategy":"EnforceSameName"}}',
        check=False,
    )
    assert denied.returncode != 0
    assert (
        'admission webhook "nsoff.validate.liqo.io" denied the request: The NamespaceMappingStrategy value '
        "cannot be modified after creation"
    ) in denied.stderr

    deleted = kubectl("delete", "nsoff", "-n", "alpha", "offloading", "--timeout=30s")
    assert 'namespaceoffloading.offloading.liqo.io "offloading" deleted' in deleted.stdout
    assert "alpha-rome" not in kube.sb.remote_namespaces("milan")
    assert kubectl("get", "nsoff", "-n", "alpha", "--ignore-not-found", "-o", "name").stdout == ""


def test_json_output_and_events_of_an_invalid_selector(kubectl: Kubectl, kube: Clients) -> None:
    kube.create_nsoff(
        "beta",
        {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}]}},
    )
    kube.sb.wait_idle(10)
    described = kubectl("describe", "nsoff", "-n", "beta", "offloading").stdout
    assert "Warning  Invalid" in described and "Invalid ClusterSelector:" in described
    events = json.loads(kubectl("get", "events", "-n", "beta", "-o", "json").stdout)
    assert events["items"][0]["reason"] == "Invalid"


def test_impersonation_with_as_follows_the_rbac_policy(kubectl: Kubectl) -> None:
    denied = kubectl("--as", "viewer", "--as-group", "liqo-dash:viewers", "label", "ns", "alpha", "x=y", check=False)
    assert denied.returncode != 0 and 'User "viewer" cannot patch resource "namespaces"' in denied.stderr
    allowed = kubectl("--as", "viewer", "--as-group", "liqo-dash:viewers", "get", "ns", "alpha", "-o", "name")
    assert allowed.stdout.strip() == "namespace/alpha"
    can = kubectl(
        "auth",
        "can-i",
        "create",
        "namespaceoffloadings.offloading.liqo.io",
        "-n",
        "alpha",
        "--as",
        "operator",
        "--as-group",
        "liqo-dash:operators",
        check=False,
    )
    assert can.stdout.strip() == "yes"


def test_get_watch_streams_table_rows(kubectl: Kubectl, kube: Clients) -> None:
    kube.create_nsoff("alpha")
    kube.sb.wait_idle(10)
    proc = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(kubectl.kubeconfig),
            "--cache-dir",
            str(kubectl.cache),
            "get",
            "nsoff",
            "-A",
            "--watch",
            "--request-timeout=20s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=kubectl.env,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    try:
        rows = [lines.get(timeout=15).split() for _ in range(2)]  # header + the existing object
        assert rows[0][:2] == ["NAMESPACE", "NAME"] and rows[1][:2] == ["alpha", "offloading"]
        kube.create_nsoff("beta")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            row = lines.get(timeout=15).split()
            if row[:1] == ["beta"] and "Ready" in row:
                break
        else:
            pytest.fail("kubectl --watch never showed beta Ready")
    finally:
        proc.terminate()
        proc.wait(10)
        reader.join(10)


def test_apply_validates_through_the_server_and_server_side_apply_reports_conflicts(
    kubectl: Kubectl, kube: Clients
) -> None:
    assert "created" in kubectl("apply", "-f", "-", stdin=MANIFEST).stdout  # no --validate=false needed
    kube.sb.wait_idle(10)
    remote = MANIFEST.replace("LocalAndRemote", "Remote")
    conflict = kubectl("apply", "--server-side", "-f", "-", stdin=remote, check=False)
    assert conflict.returncode != 0
    assert 'conflict with "kubectl-client-side-apply"' in conflict.stderr
    forced = kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=remote)
    assert "serverside-applied" in forced.stdout
    obj = kube.get_nsoff("alpha")
    assert obj["spec"]["podOffloadingStrategy"] == "Remote"
    assert any(m["manager"] == "kubectl" and m["operation"] == "Apply" for m in obj["metadata"]["managedFields"])
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: applied\n  labels: {tier: gold}\n"
    kubectl("apply", "-f", "-", stdin=namespace)
    kubectl("apply", "-f", "-", stdin=namespace.replace("gold", "silver"))
    assert kube.core.read_namespace("applied").metadata.labels["tier"] == "silver"
