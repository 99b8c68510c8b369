"""Bulk throughput and listing against kubectl, side by side on one sandbox (issue 15's figures).

One sandbox API server in its own process, 50 ms of latency added to every API request (and, with
``max_inflight``, the API server's 429 + Retry-After beyond that many requests in flight):

- ``kubectl apply -f`` of N NamespaceOffloading manifests in one call, timed to its exit;
- the same N offloads through ``request_bulk`` (the bulk form's and API's use case: the access review
  and dry-run of every namespace, then a real Celery worker on a real Redis pushing them), timed from
  the request until the last change is applied; the worker's peak RSS is sampled meanwhile;
- listing the N offloadings: the REST API (``/api/v1/namespaces/?offloaded=true``, every page, from the
  snapshot) against ``kubectl get namespaceoffloadings -A -o json`` (from the API server).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness import ROOT
from bench.recovery import _Pipeline, _wait, use_broker

LATENCY_S = 0.05
SPEC = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}


@dataclass
class Throughput:
    namespaces: int
    latency_s: float
    max_inflight: int
    worker_concurrency: int
    kubectl_apply_s: float
    bulk_s: float
    bulk_request_s: float  # of which the request itself (reviews and dry-runs), before the worker
    bulk_applied: int
    bulk_failed: int
    throttled: int  # requests the sandbox answered 429 during the bulk
    worker_peak_rss_mb: float  # the largest worker process
    worker_total_peak_pss_mb: float  # the parent and its pool together (PSS)
    api_list_s: float
    kubectl_list_s: float

    @property
    def ratio(self) -> float:
        return round(self.bulk_s / self.kubectl_apply_s, 3)

    @property
    def list_ratio(self) -> float:
        return round(self.api_list_s / self.kubectl_list_s, 3)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bulk_vs_kubectl_ratio": self.ratio, "api_list_vs_kubectl_ratio": self.list_ratio}

    def lines(self) -> list[str]:
        goal = "meets" if self.ratio <= 0.5 else "MISSES"
        rss = "meets" if self.worker_peak_rss_mb <= 250 else "MISSES"
        return [
            f"Bulk vs kubectl ({self.namespaces:,} offloads, {self.latency_s * 1000:.0f} ms API latency, "
            f"max in flight {self.max_inflight or 'unlimited'}, worker concurrency {self.worker_concurrency}):",
            f"  kubectl apply -f (one call)        {self.kubectl_apply_s:7.1f} s",
            f"  bulk, request to last applied      {self.bulk_s:7.1f} s  (request {self.bulk_request_s:.1f} s; "
            f"applied {self.bulk_applied}, failed {self.bulk_failed}, 429s {self.throttled})",
            f"  bulk_vs_kubectl_ratio              {self.ratio:7.3f}    goal <= 0.5: {goal}",
            f"  worker peak RSS                    {self.worker_peak_rss_mb:7.1f} MB per process "
            f"({self.worker_total_peak_pss_mb:.0f} MB PSS parent + pool)  goal <= 250 MB: {rss}",
            f"  list: REST API (snapshot, all pages) {self.api_list_s:5.2f} s vs kubectl get -A -o json "
            f"{self.kubectl_list_s:.2f} s  api_list_vs_kubectl_ratio {self.list_ratio:.3f}",
        ]


class _Sandbox:
    """``python -m sandbox serve`` (minimal scenario, controllers reacting at once) in its own process."""

    def __init__(self, var_dir: Path) -> None:
        self.kubeconfig = var_dir / "throughput.kubeconfig"
        self.log = var_dir / "throughput-sandbox.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sandbox", "serve", "--port", "0", "--scenario", "minimal",
                 "--kubeconfig", str(self.kubeconfig)],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
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
        {"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
         "metadata": {"name": "offloading", "namespace": name}, "spec": SPEC}
        for name in names
    ]  # fmt: skip
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


def measure(var_dir: Path, size: int, log: Callable[[str], None], max_inflight: int = 0) -> Throughput:
    from django.conf import settings
    from django.db.models import Max
    from kubernetes import client, config

    from liqo_dash.celery import app
    from offloading import kube
    from offloading.changes.bulk import request_bulk
    from offloading.changes.snapshot import refresh
    from offloading.choices import ChangeState
    from offloading.context import Actor
    from offloading.models import ChangeRequest

    sandbox = _Sandbox(var_dir)
    pipeline = _Pipeline(var_dir, sandbox.kubeconfig)
    pipeline.env.update(
        {"DATABASE_URL": os.environ["DATABASE_URL"], "LIQO_DASH_VAR_DIR": str(var_dir), "KUBE_REQUEST_TIMEOUT": "10"}
    )
    saved: dict[str, Any] | None = None
    saved_dash = settings.LIQO_DASH
    try:
        settings.LIQO_DASH = {
            **settings.LIQO_DASH,
            "KUBECONFIG": str(sandbox.kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
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
        saved = use_broker(app, {"task_always_eager": False, "broker_url": pipeline.redis_url})
        pipeline.start()
        sandbox.admin("faults", "PUT", {"latency": LATENCY_S, "max_inflight": max_inflight})
        log(f"throughput: kubectl apply of {size} NamespaceOffloadings ({LATENCY_S * 1000:.0f} ms latency)")
        kubectl_s = _kubectl(sandbox.kubeconfig, "apply", "-f", "-", stdin=_manifests(by_kubectl))
        log(f"throughput: kubectl apply took {kubectl_s:.1f} s; now the bulk")
        worker = next(p for p in pipeline.procs if "worker" in " ".join(map(str, p.args)))
        sampler = _RssSampler(worker.pid)
        throttled_before = sandbox.admin("stats").get("throttled", 0)
        started = time.perf_counter()
        bulk = request_bulk("offload", "throughput=bulk", dict(SPEC), Actor(None, "bench", "api", "throughput"))
        request_s = time.perf_counter() - started
        changes = ChangeRequest.objects.filter(bulk=bulk)
        _wait(lambda: not changes.filter(state__in=ChangeState.pending()).exists(), 1800, "the bulk to finish")
        last = changes.aggregate(last=Max("finished_at"))["last"]
        bulk_s = time.perf_counter() - started
        if last is not None:  # the worker's own clock for the last change, not the polling's
            bulk_s = min(bulk_s, (last - bulk.created_at).total_seconds())
        one, total = sampler.stop()
        throttled = sandbox.admin("stats").get("throttled", 0) - throttled_before
        log(f"throughput: bulk took {bulk_s:.1f} s")
        if not refresh().ok:
            raise RuntimeError("the snapshot could not be refreshed after the bulk")
        api_s = min(_api_list_all() for _ in range(3))
        kubectl_list_s = min(
            _kubectl(sandbox.kubeconfig, "get", "namespaceoffloadings.offloading.liqo.io", "-A", "-o", "json")
            for _ in range(3)
        )
        return Throughput(
            namespaces=size,
            latency_s=LATENCY_S,
            max_inflight=max_inflight,
            worker_concurrency=int(settings.CELERY_WORKER_CONCURRENCY),
            kubectl_apply_s=round(kubectl_s, 2),
            bulk_s=round(bulk_s, 2),
            bulk_request_s=round(request_s, 2),
            bulk_applied=changes.filter(state=ChangeState.APPLIED).count(),
            bulk_failed=changes.filter(state=ChangeState.FAILED).count(),
            throttled=int(throttled),
            worker_peak_rss_mb=round(one, 1),
            worker_total_peak_pss_mb=round(total, 1),
            api_list_s=round(api_s, 3),
            kubectl_list_s=round(kubectl_list_s, 3),
        )
    finally:
        pipeline.stop()
        sandbox.stop()
        if saved is not None:
            use_broker(app, saved)
        settings.LIQO_DASH = saved_dash
        kube.reset_client()
