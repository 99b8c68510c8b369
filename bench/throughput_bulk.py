"""The bulk of the throughput run (``bench/throughput.py``): ``request_bulk`` of N offloads as an admin
user (with ``LIQO_DASH_BULK_CHECKS=request`` an access review and a dry-run per namespace first; by
default the pushes are the checks), then the worker pushing them, timed from the request
until the last change is applied; meanwhile the status of other namespaces is changed one at a time and
timed until the snapshot holds it, and the worker's memory and every process's CPU are sampled. Then
the N offloadings are listed through the REST API, against ``kubectl get -A -o json``."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.recovery import _wait
from bench.throughput_procs import RssSampler, SandboxProcess, cpu_s
from bench.throughput_reference import SPEC, WRITE_VERBS


@dataclass
class BulkRun:
    """What the bulk measured (the figures of ``Throughput`` that it fills)."""

    seconds: float = 0.0
    request_s: float = 0.0
    applied: int = 0
    failed: int = 0
    request_calls: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)  # request and worker
    peak_inflight: int = 0
    throttled: int = 0
    cpu_s: dict[str, float] = field(default_factory=dict)
    load_average: float = 0.0
    visible: list[float] = field(default_factory=list)
    worker_peak_rss_mb: float = 0.0
    worker_total_peak_pss_mb: float = 0.0


def run_bulk(sandbox: SandboxProcess, worker_pid: int, watcher_pid: int, probed: list[str]) -> BulkRun:
    """Offload the namespaces labelled ``throughput=bulk`` in one bulk, changing the status of ``probed``
    (already offloaded) meanwhile."""
    from django.db.models import Max

    from offloading.changes.bulk import request_bulk
    from offloading.choices import ChangeState
    from offloading.context import Actor
    from offloading.models import ChangeRequest

    user = _bench_admin()
    sampler = RssSampler(worker_pid)
    sandbox.admin("stats", "DELETE")
    throttled_before = sandbox.admin("stats").get("throttled", 0)
    probe = _StatusProbe(sandbox.kubeconfig, probed)
    pids = {
        "worker": worker_pid,
        "sandbox": sandbox.proc.pid,
        "watcher": watcher_pid,
        "request (this process)": os.getpid(),
    }
    cpu_before = {key: cpu_s(pid, children=key == "worker") for key, pid in pids.items()}
    wall_started = time.time()
    started = time.perf_counter()
    bulk = request_bulk("offload", "throughput=bulk", dict(SPEC), Actor(user.pk, user.username, "api", "throughput"))
    run = BulkRun(request_s=time.perf_counter() - started)
    run.request_calls = _bulk_calls(sandbox.admin("stats"))
    changes = ChangeRequest.objects.filter(bulk=bulk)
    _wait(lambda: not changes.filter(state__in=ChangeState.pending()).exists(), 1800, "the bulk to finish")
    last = changes.aggregate(last=Max("finished_at"))["last"]
    run.seconds = time.perf_counter() - started
    if last is not None:  # the worker's own clock for the last change, not the polling's
        run.seconds = min(run.seconds, last.timestamp() - wall_started)
    run.cpu_s = {key: round(cpu_s(pid, children=key == "worker") - cpu_before[key], 1) for key, pid in pids.items()}
    run.load_average = os.getloadavg()[0]
    run.visible = probe.stop()
    run.worker_peak_rss_mb, run.worker_total_peak_pss_mb = sampler.stop()
    stats = sandbox.admin("stats")
    run.throttled = int(stats.get("throttled", 0) - throttled_before)
    run.calls = _bulk_calls(stats)
    run.peak_inflight = int(stats.get("peak_inflight", 0))
    run.applied = changes.filter(state=ChangeState.APPLIED).count()
    run.failed = changes.filter(state=ChangeState.FAILED).count()
    return run


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


def _bench_admin() -> Any:
    from django.contrib.auth import get_user_model

    model = get_user_model()
    return model.objects.filter(username="bench-admin").first() or model.objects.create_superuser(
        "bench-admin", "bench-admin@example.com", "bench-admin-password"
    )


def api_list_all() -> float:
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
