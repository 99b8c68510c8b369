"""Deployment artefacts: production settings, the container image definition, the kustomize manifests
(rendered and validated against the Kubernetes schemas offline) and least-privilege RBAC derived from
what offloading/kube.py calls."""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.32.0"  # the oldest Kubernetes the manifests are meant for
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (make system-deps)")


def minimal_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Only what an operator sets in production, plus PATH."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": "liqo-dash.example.com",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LIQO_DASH_VAR_DIR": str(tmp_path / "var"),
        **extra,
    }


def check_deploy(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check", "--deploy", "--fail-level", "WARNING"],
        env=minimal_env(tmp_path, **extra),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_passes_with_only_the_required_settings(tmp_path: Path) -> None:
    result = check_deploy(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_insecure_http_is_the_one_switch_that_relaxes_tls(tmp_path: Path) -> None:
    result = check_deploy(tmp_path, INSECURE_HTTP="true")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in output


def test_short_secret_key_fails_the_deploy_check(tmp_path: Path) -> None:
    result = check_deploy(tmp_path, SECRET_KEY="too-short")
    assert result.returncode != 0
    assert "security.W009" in result.stdout + result.stderr


# --- container image ------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def procfile() -> dict[str, list[str]]:
    commands = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, command = line.partition(":")
            commands[name.strip()] = shlex.split(command.replace("${PORT:-8000}", "8000"))
    return commands


def test_dockerfile_is_multi_stage_pinned_and_non_root() -> None:
    instructions = dockerfile_instructions()
    bases = [rest.split()[0] for keyword, rest in instructions if keyword == "FROM" and "--from" not in rest]
    assert len(bases) >= 2, "multi-stage: a build stage and a runtime stage"
    for base in bases:
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-[a-z]+)?", base), base
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users, "the image must not run as root"
    user = users[-1].split(":")[0]
    assert user not in ("0", "root") and user.isdigit(), "a numeric non-root USER (runAsNonRoot can verify it)"
    # The last USER comes after every RUN: nothing runs as root at container start.
    last_user = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "USER")
    assert all(keyword != "RUN" for keyword, _ in instructions[last_user:])


def test_dockerfile_installs_the_pinned_requirements_and_collects_static() -> None:
    instructions = dockerfile_instructions()
    copies = [rest for keyword, rest in instructions if keyword == "COPY"]
    runs = [rest for keyword, rest in instructions if keyword == "RUN"]
    assert any(rest.startswith("requirements.txt ") for rest in copies)
    assert any(re.search(r"pip install .*-r \S*requirements\.txt", run) for run in runs)
    assert any("manage.py collectstatic" in run for run in runs)


def test_dockerfile_runs_the_procfile_web_command() -> None:
    cmd = [rest for keyword, rest in dockerfile_instructions() if keyword == "CMD"][-1]
    assert json.loads(cmd) == procfile()["web"]


def test_image_contents_are_enough_to_collect_static_and_start(tmp_path: Path) -> None:
    """Copy exactly what the Dockerfile copies and run its build step there: a path it forgets fails."""
    app = tmp_path / "app"
    app.mkdir()
    env = {"PATH": os.environ.get("PATH", "")}
    for keyword, rest in dockerfile_instructions():
        if keyword == "COPY" and "--from" not in rest:
            source, target = rest.split()
            if source == "requirements.txt":
                continue
            destination = app / target if target not in ("./",) else app / source
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, destination, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / source, destination)
        if keyword == "ENV":
            for name, value in re.findall(r"(\w+)=(\S+)", rest):
                env[name] = value.replace("$PATH", os.environ.get("PATH", ""))
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env["LIQO_DASH_VAR_DIR"] = str(tmp_path / "var")
    build = [rest for keyword, rest in dockerfile_instructions() if keyword == "RUN" and "collectstatic" in rest][0]
    build = build.replace("rm -rf /tmp/var", "true")
    result = subprocess.run(build, shell=True, cwd=app, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (app / "staticfiles" / "vendor").exists() or any((app / "staticfiles").iterdir())
    # The gunicorn configuration the CMD names is in the image and loads.
    check = subprocess.run(
        [sys.executable, "-c", "import runpy; runpy.run_path('deploy/gunicorn.conf.py')"],
        cwd=app,
        env={**env, "LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr


def test_dockerignore_keeps_local_state_out() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    for path in (".git", ".venv", "var", ".env"):
        assert path in ignored


# --- manifests --------------------------------------------------------------------------------------


@cache
def render(target: str) -> tuple[dict[str, Any], ...]:
    assert KUBECTL is not None
    result = subprocess.run([KUBECTL, "kustomize", target], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def production_with_ingress(tmp_path: Path, component: str = "ingress") -> tuple[dict[str, Any], ...]:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(DEPLOY / "overlays/production", overlay)],
                "components": [os.path.relpath(DEPLOY / "components" / component, overlay)],
            }
        )
    )
    return render(str(overlay))


def by_kind(docs: tuple[dict[str, Any], ...], kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


OVERLAYS = ["trial", "production"]


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_matches_the_kubernetes_schemas(overlay: str) -> None:
    import kubernetes_validate

    docs = render(str(DEPLOY / "overlays" / overlay))
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@needs_kubectl
def test_impersonation_is_granted_only_by_its_component(tmp_path: Path) -> None:
    import kubernetes_validate

    docs = render(str(DEPLOY / "overlays/production"))  # the overlays include the component
    role = by_kind(docs, "ClusterRole")["liqo-dash-impersonate"]
    kubernetes_validate.validate(role, KUBERNETES_VERSION, strict=True)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]
    binding = by_kind(docs, "ClusterRoleBinding")["liqo-dash-impersonate"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "liqo-dash", "namespace": "liqo-dash"}]
    base_rules = by_kind(render(str(DEPLOY / "overlays/production")), "ClusterRole")["liqo-dash"]["rules"]
    assert not any("impersonate" in rule["verbs"] for rule in base_rules)  # only in its own role


@needs_kubectl
def test_ingress_component_renders_and_validates(tmp_path: Path) -> None:
    import kubernetes_validate

    docs = production_with_ingress(tmp_path)
    ingress = by_kind(docs, "Ingress")["liqo-dash"]
    kubernetes_validate.validate(ingress, KUBERNETES_VERSION, strict=True)
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "liqo-dash"
    assert "Ingress" not in {doc["kind"] for doc in render(str(DEPLOY / "overlays/production"))}


def test_schema_validation_can_fail() -> None:
    import kubernetes_validate

    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_processes_replicas_probes_and_disruption_budget(overlay: str) -> None:
    docs = render(str(DEPLOY / "overlays" / overlay))
    deployments = by_kind(docs, "Deployment")
    web = deployments["liqo-dash-web"]
    assert web["spec"]["replicas"] == 2
    assert deployments["liqo-dash-beat"]["spec"]["replicas"] == 1
    assert deployments["liqo-dash-watcher"]["spec"]["replicas"] == 2  # one leads (Lease), one stands by
    assert deployments["liqo-dash-worker"]["spec"]["replicas"] >= 1
    container = web["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in container["env"]
    pdb = by_kind(docs, "PodDisruptionBudget")["liqo-dash-web"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= web["spec"]["template"]["metadata"]["labels"].items()
    assert pdb["spec"]["minAvailable"] == 1
    service = by_kind(docs, "Service")["liqo-dash"]
    assert service["spec"]["selector"].items() <= web["spec"]["template"]["metadata"]["labels"].items()
    assert {p["name"] for p in container["ports"]} >= {service["spec"]["ports"][0]["targetPort"]}


def pod_specs(docs: tuple[dict[str, Any], ...]) -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc["spec"]["template"]["spec"]
        for doc in docs
        if doc["kind"] in ("Deployment", "StatefulSet")
    }


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_is_locked_down(overlay: str) -> None:
    for name, spec in pod_specs(render(str(DEPLOY / "overlays" / overlay))).items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        for container in spec.get("initContainers", []) + spec["containers"]:
            where = f"{name}/{container['name']}"
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert "add" not in context["capabilities"], where
            resources = container["resources"]
            assert resources["requests"]["cpu"] and resources["requests"]["memory"], where
            assert resources["limits"]["memory"], where
        if name.startswith("liqo-dash-") and spec.get("serviceAccountName") == "liqo-dash":
            volumes = {volume["name"]: volume for volume in spec["volumes"]}
            for container in spec.get("initContainers", []) + spec["containers"]:
                mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
                assert "emptyDir" in volumes[mounts["/tmp"]], f"{name}: /tmp must be a writable emptyDir"


@needs_kubectl
def test_manifest_commands_match_the_procfile() -> None:
    docs = render(str(DEPLOY / "overlays/production"))
    config = by_kind(docs, "ConfigMap")["liqo-dash-config"]["data"]
    var_dir = config["LIQO_DASH_VAR_DIR"]
    expected = {name: [arg.replace("var/", f"{var_dir}/") for arg in command] for name, command in procfile().items()}
    deployments = by_kind(docs, "Deployment")
    for name, command in expected.items():
        container = deployments[f"liqo-dash-{name}"]["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == command, name


@needs_kubectl
def test_secrets_are_not_in_the_production_render_and_the_trial_brings_its_services() -> None:
    production = render(str(DEPLOY / "overlays/production"))
    assert "Secret" not in {doc["kind"] for doc in production}
    for spec in pod_specs(production).values():
        for container in spec["containers"]:
            assert {"secretRef": {"name": "liqo-dash"}} in container["envFrom"]
    trial = render(str(DEPLOY / "overlays/trial"))
    secret = by_kind(trial, "Secret")["liqo-dash"]
    assert set(secret["data"]) == {"SECRET_KEY", "AUDIT_HMAC_KEY", "DATABASE_URL", "REDIS_URL"}
    assert {"liqo-dash-redis", "liqo-dash-postgres"} <= set(by_kind(trial, "Service"))
    trial_config = by_kind(trial, "ConfigMap")["liqo-dash-config"]["data"]
    assert trial_config["INSECURE_HTTP"] == "true"
    assert "INSECURE_HTTP" not in by_kind(production, "ConfigMap")["liqo-dash-config"]["data"]


# --- RBAC: derived from offloading/kube.py ------------------------------------------------------------

# Typed API classes of the kubernetes client and their API group.
API_GROUPS = {
    "CoreV1Api": "",
    "AuthorizationV1Api": "authorization.k8s.io",
    "AppsV1Api": "apps",
    "RbacAuthorizationV1Api": "rbac.authorization.k8s.io",
    "CoordinationV1Api": "coordination.k8s.io",
}
VERBS = {
    "list": "list",
    "get": "get",
    "read": "get",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
}
# Granted by deploy/components/impersonation only, and required once kube.py impersonates.
IMPERSONATION = {("", "users", "impersonate"), ("", "groups", "impersonate")}


def _plural(snake: str) -> str:
    word = snake.replace("_", "")
    return word if word.endswith("s") else word + "s"


def derive_kube_permissions(source: str, constants: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) for every client call in kube.py: ``_custom().<method>(*TUPLE...)`` with
    the group/resource from the tuple constant, typed APIs by method name, and ``watch`` for every
    list method a function streams through ``Watch().stream``."""
    tree = ast.parse(source)
    # Which helper returns which client class: def _core(): return client.CoreV1Api(...)
    helpers: dict[str, str] = {}
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name, node in functions.items():
        for ret in ast.walk(node):
            if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call):
                func = ret.value.func
                if isinstance(func, ast.Attribute) and func.attr.endswith("Api"):
                    helpers[name] = func.attr
    per_function: dict[str, set[tuple[str, str, str]]] = {}
    for name, node in functions.items():
        found: set[tuple[str, str, str]] = set()
        for expr in ast.walk(node):
            if not isinstance(expr, (ast.Call, ast.Tuple, ast.Return)):
                continue
            for attr in ast.walk(expr):
                if not (
                    isinstance(attr, ast.Attribute)
                    and isinstance(attr.value, ast.Call)
                    and isinstance(attr.value.func, ast.Name)
                    and attr.value.func.id in helpers
                ):
                    continue
                api = helpers[attr.value.func.id]
                verb_word, _, rest = attr.attr.partition("_")
                if verb_word not in VERBS:
                    raise AssertionError(f"kube.py calls {api}.{attr.attr}: teach this test its verb")
                verb = VERBS[verb_word]
                if api == "CustomObjectsApi":
                    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id in constants}
                    assert names, f"{name}: custom object call without a known resource tuple"
                    for constant in names:
                        group, _version, resource = constants[constant]
                        found.add((group, resource, verb))
                else:
                    if api not in API_GROUPS:
                        raise AssertionError(f"kube.py uses {api}: add its API group to this test")
                    resource = _plural(re.sub(r"^(namespaced_|cluster_)|_for_all_namespaces$", "", rest))
                    found.add((API_GROUPS[api], resource, verb))
        per_function[name] = found
    permissions = set().union(*per_function.values())
    for node in functions.values():
        streams = any(isinstance(n, ast.Attribute) and n.attr == "stream" for n in ast.walk(node))
        if not streams:
            continue
        called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        for callee in called & set(per_function):
            permissions |= {(g, r, "watch") for g, r, v in per_function[callee] if v == "list"}
    return permissions


def kube_permissions() -> set[tuple[str, str, str]]:
    from offloading import kube

    source = (ROOT / "offloading/kube.py").read_text()
    constants = {
        name: value
        for name, value in vars(kube).items()
        if isinstance(value, tuple) and len(value) == 3 and all(isinstance(v, str) for v in value)
    }
    derived = derive_kube_permissions(source, constants)
    if "Impersonate-User" in source or "impersonat" in source.lower():
        derived |= IMPERSONATION
    return derived


def rendered_permissions(docs: tuple[dict[str, Any], ...]) -> set[tuple[str, str, str]]:
    """What the cluster-wide role and the namespaced leader-election role grant together."""
    roles = by_kind(docs, "ClusterRole")
    rules = roles["liqo-dash"]["rules"] + by_kind(docs, "Role")["liqo-dash-leader"]["rules"]
    rules += roles.get("liqo-dash-impersonate", {}).get("rules", [])
    granted = set()
    for rule in rules:
        assert "resourceNames" not in rule or rule["resourceNames"]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    granted.add((group, resource, verb))
    return granted


def test_rbac_derivation_reads_kube_py() -> None:
    """The derivation itself: known calls of today's kube.py, and a call it cannot classify fails."""
    derived = kube_permissions()
    assert ("offloading.liqo.io", "namespaceoffloadings", "update") in derived  # replace_namespaced_...
    assert ("", "namespaces", "patch") in derived  # label_namespace
    assert ("", "nodes", "watch") in derived  # watch() streams _list_method("nodes")
    assert ("core.liqo.io", "foreignclusters", "create") not in derived
    source = "def _core():\n    return client.CoreV1Api(api_client())\n\ndef f():\n    _core().connect_node_proxy()\n"
    with pytest.raises(AssertionError, match="teach this test"):
        derive_kube_permissions(source, {})


@needs_kubectl
def test_cluster_role_grants_exactly_what_kube_py_uses() -> None:
    docs = render(str(DEPLOY / "overlays/production"))
    granted = rendered_permissions(docs)
    for group, resource, verb in granted:
        assert "*" not in (group, resource, verb), "no wildcards"
    expected = kube_permissions()
    assert granted - expected == set(), "granted but never used"
    assert expected - granted == set(), "used but not granted"
    binding = by_kind(docs, "ClusterRoleBinding")["liqo-dash"]
    assert binding["roleRef"]["name"] == "liqo-dash"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "liqo-dash", "namespace": "liqo-dash"}]
    for spec in pod_specs(docs).values():
        assert spec["serviceAccountName"] == "liqo-dash"
