"""Deployment artefacts: production settings, the container image definition, the kustomize manifests
(rendered and validated against the Kubernetes schemas offline) and least-privilege RBAC derived from
what offloading/cluster/kube.py calls."""

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
                "namespace": "liqo-dash",
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


def code_default(name: str, module: str = "access/conf.py") -> str:
    """The default of ``env.string(NAME, default)`` in the settings source."""
    for node in ast.walk(ast.parse((ROOT / module).read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "string"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == name
        ):
            default = ast.literal_eval(node.args[1])
            assert isinstance(default, str)
            return default
    raise AssertionError(f"{name} has no env.string default in {module}")


def impersonated_groups(docs: tuple[dict[str, Any], ...]) -> set[str]:
    """The groups the dashboard impersonates with these manifests: KUBE_IMPERSONATE_GROUPS from the
    rendered ConfigMap, or the code default."""
    from access.roles import parse_role_map

    config = by_kind(docs, "ConfigMap")["liqo-dash-config"]["data"]
    text = config.get("KUBE_IMPERSONATE_GROUPS", code_default("KUBE_IMPERSONATE_GROUPS"))
    return set(parse_role_map(text).values())


def impersonation_problems(docs: tuple[dict[str, Any], ...]) -> list[str]:
    """What an attacker holding the pods' token could abuse in the impersonate rules of every role."""
    groups = impersonated_groups(docs)
    problems = []
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules", []):
            if not {"impersonate", "*"} & set(rule["verbs"]):
                continue
            where = f"{doc['kind']} {doc['metadata']['name']}"
            resources = set(rule.get("resources", []))
            if "*" in resources or "*" in rule.get("apiGroups", []):
                problems.append(f"{where}: wildcard impersonation")
            if resources - {"users", "groups"}:
                problems.append(f"{where}: impersonates {sorted(resources - {'users', 'groups'})}")
            if "groups" in resources:
                names = rule.get("resourceNames")
                if not names:
                    problems.append(f"{where}: groups without resourceNames (Impersonate-Group: system:masters)")
                    continue
                if any(name.startswith("system:") for name in names):
                    problems.append(f"{where}: a system: group among {names}")
                if set(names) != groups:
                    problems.append(
                        f"{where}: groups {sorted(names)} but KUBE_IMPERSONATE_GROUPS maps {sorted(groups)}"
                    )
    return problems


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_impersonation_is_limited_to_the_dashboard_groups(overlay: str) -> None:
    import kubernetes_validate

    docs = render(str(DEPLOY / "overlays" / overlay))  # both overlays include the component
    role = by_kind(docs, "ClusterRole")["liqo-dash-impersonate"]
    kubernetes_validate.validate(role, KUBERNETES_VERSION, strict=True)
    assert impersonation_problems(docs) == []
    groups = impersonated_groups(docs)
    assert groups == {"liqo-dash:viewers", "liqo-dash:operators", "liqo-dash:admins"}
    assert {name for rule in role["rules"] for name in rule.get("resourceNames", [])} == groups
    # Users: any name (RBAC has no prefix match); the dashboard sends only its own prefix.
    config = by_kind(docs, "ConfigMap")["liqo-dash-config"]["data"]
    assert config["KUBE_IMPERSONATE_USER_PREFIX"] == "liqo-dash:"
    assert config["KUBE_IMPERSONATE"] == "true"
    binding = by_kind(docs, "ClusterRoleBinding")["liqo-dash-impersonate"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "liqo-dash", "namespace": "liqo-dash"}]
    base_rules = by_kind(docs, "ClusterRole")["liqo-dash"]["rules"]
    assert not any("impersonate" in rule["verbs"] for rule in base_rules)  # only in its own role


def test_the_impersonation_check_catches_what_made_the_token_cluster_admin() -> None:
    config = {"kind": "ConfigMap", "metadata": {"name": "liqo-dash-config"}, "data": {}}

    def role(*rules: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        return (config, {"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": list(rules)})

    dashboard = sorted(impersonated_groups((config,)))  # the code default
    assert dashboard == ["liqo-dash:admins", "liqo-dash:operators", "liqo-dash:viewers"]
    users = {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}
    assert impersonation_problems(role(users, {**users, "resources": ["groups"], "resourceNames": dashboard})) == []
    before = {"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}
    assert "without resourceNames" in impersonation_problems(role(before))[0]
    masters = {**users, "resources": ["groups"], "resourceNames": [*dashboard, "system:masters"]}
    assert any("system: group" in p for p in impersonation_problems(role(masters)))
    other = {**users, "resources": ["groups"], "resourceNames": ["liqo-dash:viewers"]}
    assert any("KUBE_IMPERSONATE_GROUPS maps" in p for p in impersonation_problems(role(other)))
    wildcard = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    assert impersonation_problems(role(wildcard))
    accounts = {**users, "resources": ["serviceaccounts"]}
    assert impersonation_problems(role(accounts))
    # A ConfigMap that maps other groups moves the expected resourceNames with it.
    custom = {**config, "data": {"KUBE_IMPERSONATE_GROUPS": "viewer=ops:view"}}
    assert impersonation_problems((custom, role(other)[1])) and impersonated_groups((custom,)) == {"ops:view"}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Label selector semantics for matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist)."""
    if selector.get("matchLabels", {}).items() - labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True


@needs_kubectl
def test_ingress_component_renders_and_validates(tmp_path: Path) -> None:
    import kubernetes_validate

    docs = production_with_ingress(tmp_path)
    ingress = by_kind(docs, "Ingress")["liqo-dash"]
    kubernetes_validate.validate(ingress, KUBERNETES_VERSION, strict=True)
    assert "Ingress" not in {doc["kind"] for doc in render(str(DEPLOY / "overlays/production"))}
    services = by_kind(docs, "Service")
    pods = [doc["spec"]["template"]["metadata"]["labels"] for doc in docs if doc["kind"] == "Deployment"]
    routes = {}
    for rule in ingress["spec"]["rules"]:
        for path in rule["http"]["paths"]:
            service = services[path["backend"]["service"]["name"]]
            kubernetes_validate.validate(service, KUBERNETES_VERSION, strict=True)
            selector = service["spec"].get("selector")
            routes[path["path"]] = bool(selector) and any(selector.items() <= labels.items() for labels in pods)
    # The dashboard, yes; the probes and the scrape, no (a Service with no pods: the controller's 503).
    assert routes == {"/": True, "/metrics": False, "/readyz": False}
    assert "Endpoints" not in {doc["kind"] for doc in docs} and "EndpointSlice" not in {doc["kind"] for doc in docs}


@needs_kubectl
@pytest.mark.parametrize(("overlay", "proxies"), [("production", "1"), ("trial", "0")])
def test_the_client_address_trusts_exactly_the_proxies_in_front(overlay: str, proxies: str) -> None:
    """Behind the Ingress one proxy appends to X-Forwarded-For; the trial is reached by port-forward,
    where the header is only what a client wrote."""
    config = by_kind(render(str(DEPLOY / "overlays" / overlay)), "ConfigMap")["liqo-dash-config"]
    assert config["data"]["TRUSTED_PROXIES"] == proxies
    assert 'env.integer("TRUSTED_PROXIES", 0)' in (ROOT / "access/conf.py").read_text()  # none by default


def test_production_requires_the_metrics_token_from_the_secret() -> None:
    web = by_kind(render(str(DEPLOY / "overlays/production")), "Deployment")["liqo-dash-web"]
    env = web["spec"]["template"]["spec"]["containers"][0]["env"]
    token = [var for var in env if var["name"] == "METRICS_TOKEN"]
    # A required key: the web pods do not start without it, so /metrics never answers without a token.
    assert token == [
        {"name": "METRICS_TOKEN", "valueFrom": {"secretKeyRef": {"name": "liqo-dash", "key": "METRICS_TOKEN"}}}
    ]
    assert "METRICS_TOKEN" in (DEPLOY / "overlays/production/kustomization.yaml").read_text()  # the Secret recipe


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_let_in_only_the_ingress_controller(overlay: str) -> None:
    docs = render(str(DEPLOY / "overlays" / overlay))
    policies = by_kind(docs, "NetworkPolicy")
    for name, policy in policies.items():
        assert policy["metadata"]["namespace"] == "liqo-dash", name
    app_pods = {"web", "worker", "beat", "watcher"}
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        labels = doc["spec"]["template"]["metadata"]["labels"]
        component = labels["app.kubernetes.io/component"]
        applying = [p for p in policies.values() if selects(p["spec"]["podSelector"], labels)]
        assert any("Ingress" in p["spec"]["policyTypes"] for p in applying), f"{component}: no ingress policy"
        sources = [source for p in applying for rule in p["spec"].get("ingress", []) for source in rule["from"]]
        if component == "web":
            assert sources == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]
            ports = [port for p in applying for rule in p["spec"].get("ingress", []) for port in rule["ports"]]
            assert ports == [{"protocol": "TCP", "port": "http"}]
        elif component in app_pods:
            assert sources == [], f"{component}: nothing connects to it"
        else:  # the trial's Redis and PostgreSQL: the liqo-dash pods only
            assert sources == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "liqo-dash"}}}], component


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


# Pods that call the Kubernetes API (and so mount the service account token); beat only talks to Redis.
API_CALLERS = {"liqo-dash-web", "liqo-dash-worker", "liqo-dash-watcher"}


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_is_locked_down(overlay: str) -> None:
    docs = render(str(DEPLOY / "overlays" / overlay))
    assert by_kind(docs, "ServiceAccount")["liqo-dash"]["automountServiceAccountToken"] is False
    for name, spec in pod_specs(docs).items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] >= 10000, name
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["automountServiceAccountToken"] is (name in API_CALLERS), name
        for container in spec.get("initContainers", []) + spec["containers"]:
            where = f"{name}/{container['name']}"
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert "add" not in context["capabilities"], where
            assert container["imagePullPolicy"] == "Always", where
            resources = container["resources"]
            assert resources["requests"]["cpu"] and resources["requests"]["memory"], where
            assert resources["limits"]["cpu"] and resources["limits"]["memory"], where
        if name.startswith("liqo-dash-") and spec.get("serviceAccountName") == "liqo-dash":
            volumes = {volume["name"]: volume for volume in spec["volumes"]}
            for container in spec.get("initContainers", []) + spec["containers"]:
                mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
                assert "emptyDir" in volumes[mounts["/tmp"]], f"{name}: /tmp must be a writable emptyDir"


def _seconds(probe: dict[str, Any]) -> int:
    """How long a dead process can go unnoticed: the first check plus every allowed failure."""
    return int(probe.get("initialDelaySeconds", 0) + probe["periodSeconds"] * probe.get("failureThreshold", 3))


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_background_processes_have_liveness_probes(overlay: str) -> None:
    docs = render(str(DEPLOY / "overlays" / overlay))
    config = by_kind(docs, "ConfigMap")["liqo-dash-config"]["data"]
    assert config["LIQO_DASH_HEARTBEAT_DIR"].startswith("/tmp/")  # the writable emptyDir
    deployments = by_kind(docs, "Deployment")
    for name, spec in pod_specs(docs).items():
        for container in spec["containers"]:
            assert "livenessProbe" in container, f"{name}/{container['name']}"
    # The worker pings its own node (celery@<pod hostname>, the default name its command keeps).
    worker = deployments["liqo-dash-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert "-n" not in worker["command"] and "--hostname" not in worker["command"]
    probe = worker["livenessProbe"]
    shell, flag, script = probe["exec"]["command"]
    assert (shell, flag) == ("sh", "-c")
    ping = shlex.split(script)
    assert ping[:6] == ["exec", "celery", "-A", "liqo_dash", "inspect", "ping"]
    assert ping[ping.index("--destination") + 1] == "celery@$HOSTNAME"
    timeout = float(ping[ping.index("--timeout") + 1])
    assert probe["timeoutSeconds"] > timeout + 10  # the ping starts a Python process, then waits
    assert probe["periodSeconds"] >= 60  # not too often: each run loads Django and Celery
    # beat and the watcher: their heartbeat files (liqo_dash/heartbeat.py), touched by the code.
    touched = {
        "beat": (ROOT / "liqo_dash/heartbeat.py").read_text(),
        "watcher": (ROOT / "offloading/management/commands/watch_cluster.py").read_text(),
    }
    for process, source in touched.items():
        assert f'touch("{process}")' in source, process
        container = deployments[f"liqo-dash-{process}"]["spec"]["template"]["spec"]["containers"][0]
        for kind in ("livenessProbe", "readinessProbe"):
            command = container[kind]["exec"]["command"]
            assert command[:5] == ["python", "-m", "liqo_dash.heartbeat", "check", process], (process, kind)
            max_age = float(command[5])
            # Far above the loop's interval (beat: at most 30 s, the watcher: about 2 s)...
            assert max_age >= (60 if process == "beat" else 20), (process, kind)
        # ...and a stuck loop is restarted within a few minutes.
        assert _seconds(container["livenessProbe"]) + float(container["livenessProbe"]["exec"]["command"][5]) <= 300


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


# --- RBAC: derived from offloading/cluster/kube.py ------------------------------------------------------------

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
    from offloading.cluster import kube

    source = (ROOT / "offloading/cluster/kube.py").read_text()
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


# --- checkov ----------------------------------------------------------------------------------------

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
# The checks skipped in the manifests, each with its reason in a checkov.io/skipN annotation.
ALLOWED_SKIPS = {
    "CKV_K8S_43",  # image digest: the overlay's images entry sets the image (and the trial's official tags)
    "CKV_K8S_35",  # secrets as files: the app reads its settings from the environment
    "CKV_K8S_38",  # service account token: web, worker and watcher call the Kubernetes API
    "CKV_K8S_9",  # readiness probe: no Service sends the worker traffic
    "CKV2_K8S_3",  # impersonate: the feature, limited to the three liqo-dash groups
}


def checkov(manifest: Path) -> dict[str, Any]:
    if not CHECKOV.exists():
        pytest.fail(
            f"checkov is not installed in {CHECKOV.parent.parent.name}: run `make .venv-checkov/.installed` "
            "(requirements-checkov.txt, its own venv)"
        )
    result = subprocess.run(
        [str(CHECKOV), "-f", str(manifest), "--framework", "kubernetes", "--compact", "--skip-download", "-o", "json"],
        cwd=manifest.parent,
        env={**os.environ, "HOME": str(manifest.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.stdout.strip(), result.stderr
    report = json.loads(result.stdout)
    report = report[0] if isinstance(report, list) else report
    assert report["check_type"] == "kubernetes", report
    assert result.returncode == (1 if report["summary"]["failed"] else 0), result.stderr
    return report


@needs_kubectl
@pytest.mark.parametrize("target", [*OVERLAYS, "production+ingress"])
def test_checkov_finds_nothing_in_the_rendered_manifests(target: str, tmp_path: Path) -> None:
    if target == "production+ingress":
        docs = production_with_ingress(tmp_path)
    else:
        docs = render(str(DEPLOY / "overlays" / target))
    manifest = tmp_path / f"{target}.yaml"
    manifest.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    report = checkov(manifest)
    failed = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in report["results"]["failed_checks"]]
    assert failed == [], "\n".join(failed)
    assert report["summary"]["passed"] > 300  # it did scan every resource
    for check in report["results"]["skipped_checks"]:
        assert check["check_id"] in ALLOWED_SKIPS, check["check_id"]
        assert check["check_result"].get("suppress_comment", "").strip(), f"{check['check_id']}: a reason"


def test_checkov_fails_a_manifest_that_is_not_locked_down(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "bad", "namespace": "liqo-dash"},
                "spec": {
                    "selector": {"matchLabels": {"app": "bad"}},
                    "template": {
                        "metadata": {"labels": {"app": "bad"}},
                        "spec": {"containers": [{"name": "bad", "image": "bad:1"}]},
                    },
                },
            }
        )
    )
    failed = {c["check_id"] for c in checkov(manifest)["results"]["failed_checks"]}
    assert {"CKV_K8S_11", "CKV_K8S_8", "CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_28"} <= failed
