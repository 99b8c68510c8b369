"""kubectl's typed subcommands against the sandbox: `kubectl create namespace|configmap|secret|
serviceaccount|service|deployment` send protobuf bodies (sandbox/protobuf.py), and the commands a Liqo admin
runs next (label, annotate, edit, replace, get -o yaml/json, get --watch, apply --server-side, delete) work
on what they made. Every object is read back with the official kubernetes client."""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client import ApiException

from sandbox import Sandbox
from tests.sandbox.conftest import Clients
from tests.sandbox.test_kubectl import KUBECTL, Kubectl

pytestmark = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")


@pytest.fixture
def kubectl(sandbox: Sandbox, tmp_path: Path) -> Kubectl:
    return Kubectl(sandbox, tmp_path)


def _missing(read: object, *args: str) -> bool:
    try:
        read(*args)  # type: ignore[operator]
    except ApiException as exc:
        return exc.status == 404
    return False


def test_kubectl_create_subcommands_send_protobuf_and_the_objects_are_stored(
    kubectl: Kubectl, kube: Clients, tmp_path: Path
) -> None:
    made = kubectl("create", "namespace", "team-a", "-v=8")
    assert "namespace/team-a created" in made.stdout
    assert "Content-Type: application/vnd.kubernetes.protobuf" in made.stderr  # what this file is about
    ns = kube.core.read_namespace("team-a")
    assert ns.status.phase == "Active" and ns.metadata.labels == {"kubernetes.io/metadata.name": "team-a"}

    blob = tmp_path / "blob"
    blob.write_bytes(b"\x00\x01\xfe\xff")
    kubectl("create", "configmap", "settings", "-n", "team-a", "--from-literal=mode=fast", f"--from-file=blob={blob}")
    cm = kube.core.read_namespaced_config_map("settings", "team-a")
    assert cm.data == {"mode": "fast"} and base64.b64decode(cm.binary_data["blob"]) == b"\x00\x01\xfe\xff"

    kubectl(
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team-a",
        "--from-literal=password=hunter2",
        "--type=example.com/basic",
    )
    secret = kube.core.read_namespaced_secret("creds", "team-a")
    assert secret.type == "example.com/basic" and base64.b64decode(secret.data["password"]) == b"hunter2"
    kubectl(
        "create",
        "secret",
        "docker-registry",
        "registry",
        "-n",
        "team-a",
        "--docker-server=registry.example.com",
        "--docker-username=robot",
        "--docker-password=s3cret",
    )
    registry = kube.core.read_namespaced_secret("registry", "team-a")
    assert registry.type == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(registry.data[".dockerconfigjson"]))["auths"]
    assert auths["registry.example.com"]["username"] == "robot"

    kubectl("create", "serviceaccount", "robot", "-n", "team-a")
    assert kube.core.read_namespaced_service_account("robot", "team-a").metadata.namespace == "team-a"

    kubectl("create", "service", "clusterip", "web", "-n", "team-a", "--tcp=80:8080", "--tcp=443:https")
    svc = kube.core.read_namespaced_service("web", "team-a")
    assert svc.spec.type == "ClusterIP" and svc.spec.selector == {"app": "web"}
    assert [(p.port, p.target_port, p.protocol) for p in svc.spec.ports] == [(80, 8080, "TCP"), (443, "https", "TCP")]

    kubectl("create", "deployment", "web", "-n", "team-a", "--image=nginx:1.27", "--replicas=2", "--port=80")
    deploy = client.AppsV1Api(kube.api_client).read_namespaced_deployment("web", "team-a")
    assert deploy.spec.replicas == 2 and deploy.spec.selector.match_labels == {"app": "web"}
    (container,) = deploy.spec.template.spec.containers
    assert (container.name, container.image, container.ports[0].container_port) == ("nginx", "nginx:1.27", 80)

    # what kubectl prints is the sandbox's JSON answer to its protobuf request
    shown = json.loads(
        kubectl("create", "configmap", "printed", "-n", "team-a", "--from-literal=a=b", "-o", "json").stdout
    )
    assert shown["data"] == {"a": "b"} and shown["metadata"]["uid"]


def test_label_annotate_edit_replace_get_and_delete_what_kubectl_created(
    kubectl: Kubectl, kube: Clients, tmp_path: Path
) -> None:
    kubectl("create", "namespace", "team-b")
    kubectl("create", "configmap", "settings", "-n", "team-b", "--from-literal=mode=fast")
    kubectl("label", "configmap", "settings", "-n", "team-b", "tier=gold", "team=search")
    kubectl("annotate", "configmap", "settings", "-n", "team-b", "note=hello world")
    kubectl("label", "configmap", "settings", "-n", "team-b", "team-")
    kubectl("label", "namespace", "team-b", "liqo.io/scheduling-enabled=true")
    cm = kube.core.read_namespaced_config_map("settings", "team-b")
    assert cm.metadata.labels == {"tier": "gold"} and cm.metadata.annotations == {"note": "hello world"}
    assert kube.core.read_namespace("team-b").metadata.labels["liqo.io/scheduling-enabled"] == "true"

    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/mode: fast/mode: edited/' \"$1\"\n")
    editor.chmod(0o755)
    kubectl.env["KUBE_EDITOR"] = str(editor)
    assert "edited" in kubectl("edit", "configmap", "settings", "-n", "team-b").stdout
    assert kube.core.read_namespaced_config_map("settings", "team-b").data == {"mode": "edited"}

    as_yaml = yaml.safe_load(kubectl("get", "configmap", "settings", "-n", "team-b", "-o", "yaml").stdout)
    as_json = json.loads(kubectl("get", "configmap", "settings", "-n", "team-b", "-o", "json").stdout)
    read = kube.core.read_namespaced_config_map("settings", "team-b")
    for shown in (as_yaml, as_json):
        assert shown["metadata"]["uid"] == read.metadata.uid
        assert shown["metadata"]["resourceVersion"] == read.metadata.resource_version
        assert shown["data"] == {"mode": "edited"} and shown["metadata"]["labels"] == {"tier": "gold"}

    as_yaml["data"] = {"mode": "replaced", "extra": "1"}
    manifest = tmp_path / "settings.yaml"
    manifest.write_text(yaml.safe_dump(as_yaml))
    kubectl("replace", "-f", str(manifest))
    assert kube.core.read_namespaced_config_map("settings", "team-b").data == {"mode": "replaced", "extra": "1"}
    stale = kubectl("replace", "-f", str(manifest), check=False)  # the resourceVersion it carries is gone
    assert stale.returncode != 0 and "the object has been modified" in stale.stderr

    kubectl("create", "serviceaccount", "robot", "-n", "team-b")
    assert 'configmap "settings" deleted' in kubectl("delete", "configmap", "settings", "-n", "team-b").stdout
    kubectl("delete", "serviceaccount", "robot", "-n", "team-b")
    assert _missing(kube.core.read_namespaced_config_map, "settings", "team-b")
    assert _missing(kube.core.read_namespaced_service_account, "robot", "team-b")
    kubectl("delete", "namespace", "team-b", "--timeout=30s")
    assert _missing(kube.core.read_namespace, "team-b")


def test_get_watch_shows_what_kubectl_create_makes(kubectl: Kubectl, kube: Clients) -> None:
    proc = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir", str(kubectl.cache)]
        + ["get", "configmaps", "-n", "alpha", "--watch", "-o", "name", "--request-timeout=20s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=kubectl.env,
    )
    stdout = proc.stdout
    assert stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stdout:
            lines.put(line.strip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        kubectl("create", "configmap", "watched", "-n", "alpha", "--from-literal=a=b")
        seen = []
        while "configmap/watched" not in seen:
            seen.append(lines.get(timeout=15))
        assert kube.core.read_namespaced_config_map("watched", "alpha").data == {"a": "b"}
    finally:
        proc.terminate()
        proc.wait(10)
        reader.join(10)


def test_server_side_apply_takes_over_fields_kubectl_create_set(kubectl: Kubectl, kube: Clients) -> None:
    kubectl("create", "configmap", "settings", "-n", "alpha", "--from-literal=mode=fast")
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: alpha\ndata:\n  mode: slow\n"
    conflict = kubectl("apply", "--server-side", "-f", "-", stdin=manifest, check=False)
    assert conflict.returncode != 0 and 'conflict with "kubectl-create"' in conflict.stderr
    assert kube.core.read_namespaced_config_map("settings", "alpha").data == {"mode": "fast"}
    applied = kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest)
    assert "configmap/settings serverside-applied" in applied.stdout
    cm = kube.core.read_namespaced_config_map("settings", "alpha")
    assert cm.data == {"mode": "slow"}
    assert any(m.manager == "kubectl" and m.operation == "Apply" for m in cm.metadata.managed_fields)
