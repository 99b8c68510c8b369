"""Bulk throughput and listing against kubectl, side by side on one sandbox (issue 15's figures, and the
issue "bulk five times faster than kubectl").

One sandbox API server in its own process, 50 ms of latency added to every API request (and, with
``max_inflight``, the API server's 429 + Retry-After beyond that many requests in flight), the watcher
(``manage.py watch_cluster``) keeping the snapshot as deployed, a real Celery worker and beat on Redis:

1. **the sandbox itself**: one request's time (sequential GETs), and whether 32 at once overlap (they
   must take about one latency, not 32: the sandbox is threaded and its latency is a sleep);
2. **the reference**: ``kubectl apply -f`` of N NamespaceOffloading manifests in one call, in two
   halves, one before the bulk and one after it (the machine's other load moves both alike), with the
   requests it made counted by the sandbox: its expected time is its requests x one request's time,
   and a measured time over 1.5x that is flagged, with the CPU the sandbox and kubectl used meanwhile;
3. **the bulk**: N offloads through ``request_bulk`` as an admin user (an access review and a server-side
   dry-run per namespace, as the form and the API do), then the worker pushing them, timed from the
   request until the last change is applied; the API calls of each phase per change, the most
   requests in flight at once, the physical limit (changes x calls per change x latency / requests in
   flight), the worker's memory, and how long a status change of another namespace takes to reach the
   snapshot meanwhile;
4. listing the N offloadings: the REST API (``/api/v1/namespaces/?offloaded=true``, every page, from the
   snapshot) against ``kubectl get namespaceoffloadings -A -o json`` (from the API server).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import ROOT
from bench.recovery import _Pipeline, _wait, use_broker

LATENCY_S = 0.05
SPEC = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
GOAL_RATIO = 0.2
SLOW_REFERENCE = 1.5  # a reference slower than this many times what its requests imply is flagged
WRITE_VERBS = ("get", "create", "update", "patch", "delete")


@dataclass
class Throughput:
    namespaces: int
    latency_s: float
    max_inflight: int  # the sandbox's 429 limit (0: none)
    kube_max_inflight: int  # the worker's bound on requests in flight (LIQO_DASH_KUBE_MAX_INFLIGHT)
    check_concurrency: int  # access reviews and dry-runs of the request at once (DRY_RUN_CONCURRENCY)
    request_single_s: float  # one API request, alone (median of 20)
    concurrent_32_s: float  # 32 requests at once, until the last answered
    kubectl_apply_s: float
    kubectl_requests: int  # every request kubectl made (discovery and OpenAPI included)
    kubectl_calls_per_object: float  # resource requests per manifest
    kubectl_expected_s: float  # kubectl_requests x request_single_s (it sends them one after the other)
    kubectl_sandbox_cpu_s: float  # CPU the sandbox used while kubectl ran
    kubectl_own_cpu_s: float  # CPU kubectl itself used
    kubectl_calls_by_verb: dict[str, int]  # its resource requests by verb and resource
    bulk_s: float
    bulk_request_s: float  # of which the request itself (reviews and dry-runs), before the worker
    bulk_applied: int
    bulk_failed: int
    request_calls_per_change: float
    worker_calls_per_change: float
    calls_by_verb: dict[str, int]  # the bulk's own calls (request and worker), by verb and resource
    peak_inflight: int  # most requests in flight at once at the sandbox during the bulk
    bulk_cpu_s: dict[str, float]  # CPU used during the bulk: worker (all processes), sandbox, watcher, this process
    physical_limit_s: float  # request + worker: changes x calls per change x latency / in flight
    throttled: int  # requests the sandbox answered 429 during the bulk
    status_visible_p50_s: float | None  # a status change of another namespace -> snapshot, during the bulk
    status_visible_p95_s: float | None
    status_samples: int
    worker_peak_rss_mb: float  # the largest worker process
    worker_total_peak_pss_mb: float  # the parent and its pool together (PSS)
    api_list_s: float
    kubectl_list_s: float
    load_average: float = 0.0  # the machine's, at the bulk's end (other work shares its cores)
    flags: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return round(self.bulk_s / self.kubectl_apply_s, 3)

    @property
    def expected_ratio(self) -> float:
        """Against the time kubectl's requests imply (the reference at the speed the latency allows)."""
        return round(self.bulk_s / self.kubectl_expected_s, 3) if self.kubectl_expected_s else 0.0

    @property
    def list_ratio(self) -> float:
        return round(self.api_list_s / self.kubectl_list_s, 3)

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "bulk_vs_kubectl_ratio": self.ratio,
            "bulk_vs_kubectl_expected_ratio": self.expected_ratio,
            "api_list_vs_kubectl_ratio": self.list_ratio,
        }

    def lines(self) -> list[str]:
        def verdict(value: float | None, goal: float) -> str:
            return "not measured" if value is None else ("meets" if value <= goal else "MISSES")

        ms = self.latency_s * 1000
        verbs = ", ".join(f"{key} {n}" for key, n in sorted(self.calls_by_verb.items()))
        out = [
            f"Bulk vs kubectl ({self.namespaces:,} offloads each, {ms:.0f} ms API latency, sandbox 429 limit "
            f"{self.max_inflight or 'none'}):",
            f"  one request alone                  {self.request_single_s * 1000:7.1f} ms; 32 at once "
            f"{self.concurrent_32_s * 1000:.0f} ms (overlapping: the sandbox is not the bottleneck)"
            if self.concurrent_32_s < 3 * self.request_single_s
            else f"  one request alone                  {self.request_single_s * 1000:7.1f} ms; 32 at once "
            f"{self.concurrent_32_s * 1000:.0f} ms: THEY DO NOT OVERLAP (the sandbox is the bottleneck)",
            f"  kubectl apply -f (two halves)      {self.kubectl_apply_s:7.1f} s   {self.kubectl_requests:,} "
            f"requests ({self.kubectl_calls_per_object:.2f} per object, one after the other): expected "
            f"{self.kubectl_expected_s:.1f} s; sandbox CPU {self.kubectl_sandbox_cpu_s:.1f} s, kubectl CPU "
            f"{self.kubectl_own_cpu_s:.1f} s meanwhile",
            "    kubectl's calls: " + ", ".join(f"{key} {n}" for key, n in sorted(self.kubectl_calls_by_verb.items())),
            f"  bulk, request to last applied      {self.bulk_s:7.1f} s   (request {self.bulk_request_s:.1f} s; "
            f"applied {self.bulk_applied}, failed {self.bulk_failed}, 429s {self.throttled})",
            "  CPU during the bulk                "
            + ", ".join(f"{key} {value:.1f} s" for key, value in self.bulk_cpu_s.items())
            + f" (load average {self.load_average:.1f} on {os.cpu_count()} cores)",
            f"  calls per change                   request {self.request_calls_per_change:.2f} + worker "
            f"{self.worker_calls_per_change:.2f}  ({verbs})",
            f"  requests in flight                 bound {self.kube_max_inflight} (worker), "
            f"{self.check_concurrency} (request checks); at most {self.peak_inflight} seen by the sandbox",
            f"  physical limit                     {self.physical_limit_s:7.1f} s   (changes x calls per change x "
            f"{ms:.0f} ms / requests in flight, both phases)",
            f"  bulk_vs_kubectl_ratio              {self.ratio:7.3f}    goal <= {GOAL_RATIO}: "
            f"{verdict(self.ratio, GOAL_RATIO)}; against kubectl's expected time {self.expected_ratio:.3f}: "
            f"{verdict(self.expected_ratio, GOAL_RATIO)}",
            f"  status of other namespaces visible p50 {self.status_visible_p50_s!s:>6} s, p95 "
            f"{self.status_visible_p95_s!s:>6} s over {self.status_samples} changes during the bulk  "
            f"goal p95 <= 1 s: {verdict(self.status_visible_p95_s, 1.0)}",
            f"  worker peak RSS                    {self.worker_peak_rss_mb:7.1f} MB per process "
            f"({self.worker_total_peak_pss_mb:.0f} MB PSS parent + pool)  goal <= 250 MB: "
            f"{verdict(self.worker_peak_rss_mb, 250)}",
            f"  list: REST API (snapshot, all pages) {self.api_list_s:5.2f} s vs kubectl get -A -o json "
            f"{self.kubectl_list_s:.2f} s  api_list_vs_kubectl_ratio {self.list_ratio:.3f}",
        ]
        return out + [f"  FLAG: {flag}" for flag in self.flags]


class _Sandbox:
    """``python -m sandbox serve`` (minimal scenario, controllers reacting at once) in its own process."""

    def __init__(self, var_dir: Path) -> None:
        self.kubeconfig = var_dir / "throughput.kubeconfig"
        self.log = var_dir / "throughput-sandbox.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
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
                    str(self.kubeconfig),
                ],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.url = ""
        deadline = time.monotonic() + 60
        while not self.url:
            found = re.search(r"sandbox listening on (\S+)", self.log.read_text(errors="replace"))
            if found:
                self.url = found.group(1)
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the sandbox did not start:\n{self.log.read_text(errors='replace')[-2000:]}")
            else:
                time.sleep(0.1)

    def admin(self, path: str, method: str = "GET", body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/sandbox/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class _RssSampler:
    """Peak memory of a process and its children: the largest RSS of one process, and the sum of their
    PSS (proportional set size: pages shared after the fork counted once, not once per child)."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.peak_one = 0
        self.peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            try:
                processes = [self.root, *self.root.children(recursive=True)]
                sizes = [p.memory_info().rss for p in processes]
                shared = [p.memory_full_info().pss for p in processes]
            except psutil.Error:
                continue
            self.peak_one = max(self.peak_one, *sizes)
            self.peak_total = max(self.peak_total, sum(shared))

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return self.peak_one / 2**20, self.peak_total / 2**20


def _manifests(names: list[str]) -> str:
    documents = [
        {
            "apiVersion": "offloading.liqo.io/v1beta1",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "namespace": name},
            "spec": SPEC,
        }
        for name in names
    ]
    import yaml

    return yaml.safe_dump_all(documents)


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args], input=stdin, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {done.stderr[-1000:]}")
    return elapsed


def _api_list_all() -> float:
    """Every offloaded namespace through the REST API, page after page, as a portal would read them."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.filter(is_superuser=True).first() or get_user_model().objects.create_superuser(
        "throughput", "throughput@example.com", "throughput-password"
    )
    client = Client()
    client.force_login(user)
    url: str | None = "/api/v1/namespaces/?offloaded=true&limit=1000"
    started = time.perf_counter()
    while url:
        response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")
        url = response.json().get("next")
    return time.perf_counter() - started


def _kubeconfig_auth(kubeconfig: Path) -> tuple[str, str]:
    import yaml

    data = yaml.safe_load(kubeconfig.read_text())
    return data["clusters"][0]["cluster"]["server"], data["users"][0]["user"]["token"]


def _request_times(kubeconfig: Path) -> tuple[float, float]:
    """One GET alone (median of 20), and 32 GETs at once (until the last answered)."""
    server, token = _kubeconfig_auth(kubeconfig)

    def get(_: int = 0) -> float:
        started = time.perf_counter()
        request = urllib.request.Request(
            f"{server}/api/v1/namespaces/default", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        return time.perf_counter() - started

    single = statistics.median(get() for _ in range(20))
    with ThreadPoolExecutor(32) as pool:
        started = time.perf_counter()
        list(pool.map(get, range(32)))
        together = time.perf_counter() - started
    return single, together


def _cpu_s(pid: int, children: bool = False) -> float:
    """CPU seconds a process used so far (with ``children``: and its living children, a worker's pool)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *(root.children(recursive=True) if children else [])]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += float(times.user + times.system)
    return total


@dataclass
class _KubectlRun:
    seconds: float = 0.0
    requests: int = 0
    resource_calls: int = 0
    sandbox_cpu_s: float = 0.0
    own_cpu_s: float = 0.0
    calls: dict[str, int] = field(default_factory=dict)


def _kubectl_apply(sandbox: _Sandbox, names: list[str], total: _KubectlRun) -> None:
    """``kubectl apply -f -`` of ``names``' manifests, adding its time, requests and CPU to ``total``."""
    sandbox.admin("stats", "DELETE")
    sandbox_cpu = _cpu_s(sandbox.proc.pid)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total.seconds += _kubectl(sandbox.kubeconfig, "apply", "-f", "-", stdin=_manifests(names))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total.own_cpu_s += (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    total.sandbox_cpu_s += _cpu_s(sandbox.proc.pid) - sandbox_cpu
    stats = sandbox.admin("stats")
    client = stats["clients"].get("sandbox-admin", {})
    total.requests += int(client.get("requests", 0))
    calls = stats["calls"].get("sandbox-admin", {})
    total.resource_calls += sum(n for key, n in calls.items() if key.endswith(" namespaceoffloadings"))
    for key, n in calls.items():
        if key.split(" ")[0] in WRITE_VERBS:
            total.calls[key] = total.calls.get(key, 0) + n


def _bulk_calls(stats: dict[str, Any]) -> dict[str, int]:
    """The calls a bulk makes (not the watcher's lists and watches, nor the status probes)."""
    calls: dict[str, int] = {}
    for per_client in stats["calls"].values():
        for key, n in per_client.items():
            verb, _, what = key.partition(" ")
            if verb in WRITE_VERBS and not what.endswith("/status"):
                calls[key] = calls.get(key, 0) + n
    return calls


class _StatusProbe:
    """While the bulk runs: change the status of other (already offloaded) namespaces one at a time and
    time until the snapshot, kept by the watcher, holds that version."""

    def __init__(self, kubeconfig: Path, names: list[str]) -> None:
        from kubernetes import client, config

        self._api = config.new_client_from_config(config_file=str(kubeconfig))
        self._custom = client.CustomObjectsApi(self._api)
        self._names = names
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from django.db import connection

        from offloading.models import Namespace

        try:
            index = 0
            while not self._stop.is_set() and self._names:
                name = self._names[index % len(self._names)]
                phase = "SomeFailed" if index % 2 == 0 else "Ready"
                index += 1
                obj = self._custom.patch_namespaced_custom_object_status(
                    "offloading.liqo.io",
                    "v1beta1",
                    name,
                    "namespaceoffloadings",
                    "offloading",
                    {"status": {"offloadingPhase": phase}},
                )
                version = int(obj["metadata"]["resourceVersion"])
                started = time.monotonic()
                while not self._stop.is_set() and time.monotonic() - started < 30:
                    row = (
                        Namespace.objects.filter(name=name)
                        .values_list("offloading_resource_version", flat=True)
                        .first()
                    )
                    if row and row.isdigit() and int(row) >= version:
                        self.times.append(time.monotonic() - started)
                        break
                    time.sleep(0.02)
                time.sleep(0.1)
        finally:
            connection.close()

    def stop(self, at_least: int = 5) -> list[float]:
        """The times measured; a bulk shorter than ``at_least`` samples gets its last ones just after it."""
        deadline = time.monotonic() + 30
        while len(self.times) < at_least and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._thread.join(60)
        self._api.close()
        return self.times


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 3)


def _bench_admin() -> Any:
    from django.contrib.auth import get_user_model

    model = get_user_model()
    return model.objects.filter(username="bench-admin").first() or model.objects.create_superuser(
        "bench-admin", "bench-admin@example.com", "bench-admin-password"
    )


class _Watcher:
    """``manage.py watch_cluster`` in its own process, as deployed (no leader election here)."""

    def __init__(self, var_dir: Path, kubeconfig: Path, env: dict[str, str]) -> None:
        self.log = var_dir / "throughput-watcher.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "watch_cluster", "--timeout-seconds", "300"],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**env, "KUBECONFIG": str(kubeconfig), "LIQO_DASH_LEADER_ELECTION": "false"},
            )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _flags(run: _KubectlRun, expected_s: float, single_s: float, together_s: float) -> list[str]:
    flags = []
    if together_s > 3 * single_s:
        flags.append(
            f"32 requests at once took {together_s * 1000:.0f} ms against {single_s * 1000:.0f} ms for one: the "
            "sandbox does not overlap them (threaded server, latency as a sleep without a lock?)"
        )
    if expected_s and run.seconds > SLOW_REFERENCE * expected_s:
        busy = run.sandbox_cpu_s / run.seconds
        if busy > 0.8:
            why = f"the sandbox was CPU-bound ({busy:.0%} of a core)"
        elif run.own_cpu_s / run.seconds > 0.5:
            why = f"kubectl itself was busy on the CPU ({run.own_cpu_s:.0f} s of {run.seconds:.0f} s)"
        else:
            load = os.getloadavg()[0]
            why = (
                f"neither the sandbox ({busy:.0%} of a core) nor kubectl ({run.own_cpu_s:.0f} s CPU) was busy: "
                f"the machine's other load (load average {load:.1f} on {os.cpu_count()} cores) slowed it"
            )
        flags.append(
            f"kubectl apply took {run.seconds:.1f} s, {run.seconds / expected_s:.1f}x the {expected_s:.1f} s its "
            f"{run.requests:,} requests imply at {single_s * 1000:.0f} ms each: the reference ran slower than the "
            f"latency allows ({why}); compare with bulk_vs_kubectl_expected_ratio"
        )
    return flags


def measure(var_dir: Path, size: int, log: Callable[[str], None], max_inflight: int = 0) -> Throughput:
    from django.conf import settings
    from django.db.models import Max
    from kubernetes import client, config

    from liqo_dash.celery import app
    from offloading.changes.bulk import request_bulk
    from offloading.choices import ChangeState
    from offloading.cluster import kube
    from offloading.context import Actor
    from offloading.models import ChangeRequest, SnapshotState
    from offloading.snapshot.refresh import refresh

    if shutil.which("kubectl") is None:
        raise RuntimeError("kubectl is not installed (make test installs kubernetes-client)")
    sandbox = _Sandbox(var_dir)
    pipeline = _Pipeline(var_dir, sandbox.kubeconfig)
    pipeline.env.update(
        {"DATABASE_URL": os.environ["DATABASE_URL"], "LIQO_DASH_VAR_DIR": str(var_dir), "KUBE_REQUEST_TIMEOUT": "10"}
    )
    saved: dict[str, Any] | None = None
    saved_dash = settings.LIQO_DASH
    watcher: _Watcher | None = None
    try:
        settings.LIQO_DASH = {
            **settings.LIQO_DASH,
            "KUBECONFIG": str(sandbox.kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
            "DRY_RUN_ON_SUBMIT": True,  # as deployed: the request asks the API server (the tests turn it off)
        }
        kube.reset_client()
        by_kubectl = [f"tp-kubectl-{i:05d}" for i in range(size)]
        by_bulk = [f"tp-bulk-{i:05d}" for i in range(size)]
        api = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
        core = client.CoreV1Api(api)

        def create(name: str) -> None:
            core.create_namespace({"metadata": {"name": name, "labels": {"throughput": name.split("-")[1]}}})

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, by_kubectl + by_bulk))
        api.close()
        if not refresh().ok:
            raise RuntimeError("the snapshot could not be refreshed from the throughput sandbox")
        user = _bench_admin()
        saved = use_broker(app, {"task_always_eager": False, "broker_url": pipeline.redis_url})
        pipeline.start()
        watcher = _Watcher(var_dir, sandbox.kubeconfig, pipeline.env)
        _wait(lambda: SnapshotState.objects.filter(last_success_at__isnull=False).exists(), 120, "the watcher's sync")
        sandbox.admin("faults", "PUT", {"latency": LATENCY_S, "max_inflight": max_inflight})
        single_s, together_s = _request_times(sandbox.kubeconfig)
        log(f"throughput: one request {single_s * 1000:.1f} ms, 32 at once {together_s * 1000:.0f} ms")
        half = size // 2
        reference = _KubectlRun()
        log(f"throughput: kubectl apply of {half} NamespaceOffloadings ({LATENCY_S * 1000:.0f} ms latency)")
        _kubectl_apply(sandbox, by_kubectl[:half], reference)
        log(f"throughput: kubectl apply took {reference.seconds:.1f} s; now the bulk of {size}")
        worker = next(p for p in pipeline.procs if "worker" in " ".join(map(str, p.args)))
        sampler = _RssSampler(worker.pid)
        sandbox.admin("stats", "DELETE")
        throttled_before = sandbox.admin("stats").get("throttled", 0)
        probe = _StatusProbe(sandbox.kubeconfig, by_kubectl[:half][:50])
        cpu_before = {
            "worker": _cpu_s(worker.pid, children=True),
            "sandbox": _cpu_s(sandbox.proc.pid),
            "watcher": _cpu_s(watcher.proc.pid),
            "request (this process)": _cpu_s(os.getpid()),
        }
        wall_started = time.time()
        started = time.perf_counter()
        bulk = request_bulk(
            "offload", "throughput=bulk", dict(SPEC), Actor(user.pk, user.username, "api", "throughput")
        )
        request_s = time.perf_counter() - started
        request_stats = sandbox.admin("stats")
        changes = ChangeRequest.objects.filter(bulk=bulk)
        _wait(lambda: not changes.filter(state__in=ChangeState.pending()).exists(), 1800, "the bulk to finish")
        last = changes.aggregate(last=Max("finished_at"))["last"]
        bulk_s = time.perf_counter() - started
        if last is not None:  # the worker's own clock for the last change, not the polling's
            bulk_s = min(bulk_s, last.timestamp() - wall_started)
        cpu_after = {
            "worker": _cpu_s(worker.pid, children=True),
            "sandbox": _cpu_s(sandbox.proc.pid),
            "watcher": _cpu_s(watcher.proc.pid),
            "request (this process)": _cpu_s(os.getpid()),
        }
        bulk_cpu = {key: round(cpu_after[key] - cpu_before[key], 1) for key in cpu_before}
        load_at_end = os.getloadavg()[0]
        visible = probe.stop()
        one, total = sampler.stop()
        stats = sandbox.admin("stats")
        throttled = stats.get("throttled", 0) - throttled_before
        log(f"throughput: bulk took {bulk_s:.1f} s (request {request_s:.1f} s); kubectl's other half")
        _kubectl_apply(sandbox, by_kubectl[half:], reference)
        log(f"throughput: kubectl apply took {reference.seconds:.1f} s in all")
        if not refresh().ok:
            raise RuntimeError("the snapshot could not be refreshed after the bulk")
        api_s = min(_api_list_all() for _ in range(3))
        kubectl_list_s = min(
            _kubectl(sandbox.kubeconfig, "get", "namespaceoffloadings.offloading.liqo.io", "-A", "-o", "json")
            for _ in range(3)
        )
        request_calls = _bulk_calls(request_stats)
        all_calls = _bulk_calls(stats)
        request_n = sum(request_calls.values())
        worker_n = sum(all_calls.values()) - request_n
        kube_inflight = int(pipeline.env.get("LIQO_DASH_KUBE_MAX_INFLIGHT") or settings.LIQO_DASH["KUBE_MAX_INFLIGHT"])
        checks = int(settings.LIQO_DASH["DRY_RUN_CONCURRENCY"])
        physical = request_n * LATENCY_S / checks + worker_n * LATENCY_S / kube_inflight
        expected = reference.requests * single_s
        return Throughput(
            namespaces=size,
            latency_s=LATENCY_S,
            max_inflight=max_inflight,
            kube_max_inflight=kube_inflight,
            check_concurrency=checks,
            request_single_s=round(single_s, 4),
            concurrent_32_s=round(together_s, 4),
            kubectl_apply_s=round(reference.seconds, 2),
            kubectl_requests=reference.requests,
            kubectl_calls_per_object=round(reference.resource_calls / size, 2),
            kubectl_expected_s=round(expected, 2),
            kubectl_sandbox_cpu_s=round(reference.sandbox_cpu_s, 1),
            kubectl_own_cpu_s=round(reference.own_cpu_s, 1),
            kubectl_calls_by_verb=reference.calls,
            bulk_s=round(bulk_s, 2),
            bulk_request_s=round(request_s, 2),
            bulk_applied=changes.filter(state=ChangeState.APPLIED).count(),
            bulk_failed=changes.filter(state=ChangeState.FAILED).count(),
            request_calls_per_change=round(request_n / size, 2),
            worker_calls_per_change=round(worker_n / size, 2),
            calls_by_verb=all_calls,
            peak_inflight=int(stats.get("peak_inflight", 0)),
            bulk_cpu_s=bulk_cpu,
            physical_limit_s=round(physical, 2),
            throttled=int(throttled),
            status_visible_p50_s=_p(visible, 0.5),
            status_visible_p95_s=_p(visible, 0.95),
            status_samples=len(visible),
            worker_peak_rss_mb=round(one, 1),
            worker_total_peak_pss_mb=round(total, 1),
            api_list_s=round(api_s, 3),
            kubectl_list_s=round(kubectl_list_s, 3),
            load_average=round(load_at_end, 1),
            flags=_flags(reference, expected, single_s, together_s),
        )
    finally:
        if watcher is not None:
            watcher.stop()
        pipeline.stop()
        sandbox.stop()
        if saved is not None:
            use_broker(app, saved)
        settings.LIQO_DASH = saved_dash
        kube.reset_client()
