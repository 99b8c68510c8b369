"""Bulk throughput and listing against kubectl, side by side on one sandbox (issue 15's figures, and the
issue "bulk five times faster than kubectl").

One sandbox API server in its own process, 50 ms of latency added to every API request (and, with
``max_inflight``, the API server's 429 + Retry-After beyond that many requests in flight), the watcher
(``manage.py watch_cluster``) keeping the snapshot as deployed, a real Celery worker and beat on Redis:

1. **the sandbox itself**: one request's time (sequential GETs), and whether 32 at once overlap (they
   must take about one latency, not 32: the sandbox is threaded and its latency is a sleep);
2. **the reference** (``bench/throughput_reference.py``): ``kubectl apply -f`` of N NamespaceOffloading
   manifests in one call, in two halves, one before the bulk and one after it (the machine's other load
   moves both alike), with the requests it made counted by the sandbox: its expected time is its
   requests x one request's time, and a measured time over 1.5x that is flagged, with the CPU the
   sandbox and kubectl used meanwhile;
3. **the bulk** (``bench/throughput_bulk.py``): N offloads through ``request_bulk`` as an admin user (as
   deployed, ``LIQO_DASH_BULK_CHECKS=push``: recorded at once, each push made as the user is the check;
   ``request``: an access review and a server-side dry-run per namespace first), then the worker
   pushing them, timed from the request until the last change is applied; the API calls of each phase
   per change, the most requests in flight at once, the physical limit (changes x calls per change x
   latency / requests in flight), the worker's memory, the CPU of every process, and how long a status
   change of another namespace takes to reach the snapshot meanwhile;
4. listing the N offloadings: the REST API (``/api/v1/namespaces/?offloaded=true``, every page, from the
   snapshot) against ``kubectl get namespaceoffloadings -A -o json`` (from the API server).

The figures and their report are ``bench/throughput_report.py``; the processes
``bench/throughput_procs.py``. ``python -m bench --only throughput`` runs this part at 1,000 namespaces
(``--quick``: 100); ``python -m bench.throughput --size N`` at any size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import harness
from bench.recovery import _Pipeline, _wait, use_broker
from bench.throughput_bulk import api_list_all, run_bulk
from bench.throughput_procs import SandboxProcess, WatcherProcess
from bench.throughput_reference import SPEC, KubectlRun, flags, kubectl, kubectl_apply, request_times
from bench.throughput_report import GOAL_RATIO, Throughput, percentile

__all__ = ["GOAL_RATIO", "LATENCY_S", "SPEC", "Throughput", "measure"]

LATENCY_S = 0.05
_Watcher = WatcherProcess  # the name other benchmarks import it by


def _fresh_namespaces(kubeconfig: Path, names: list[str]) -> None:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    core = client.CoreV1Api(api)

    def create(name: str) -> None:
        core.create_namespace({"metadata": {"name": name, "labels": {"throughput": name.split("-")[1]}}})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, names))
    api.close()


def measure(var_dir: Path, size: int, log: Callable[[str], None], max_inflight: int = 0) -> Throughput:
    from django.conf import settings

    from liqo_dash.celery import app
    from offloading.cluster import kube
    from offloading.models import SnapshotState
    from offloading.snapshot.refresh import refresh

    if shutil.which("kubectl") is None:
        raise RuntimeError("kubectl is not installed (make test installs kubernetes-client)")
    sandbox = SandboxProcess(var_dir)
    pipeline = _Pipeline(var_dir, sandbox.kubeconfig)
    pipeline.env.update(
        {"DATABASE_URL": os.environ["DATABASE_URL"], "LIQO_DASH_VAR_DIR": str(var_dir), "KUBE_REQUEST_TIMEOUT": "10"}
    )
    saved: dict[str, Any] | None = None
    saved_dash = settings.LIQO_DASH
    watcher: WatcherProcess | None = None
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
        _fresh_namespaces(sandbox.kubeconfig, by_kubectl + by_bulk)
        if not refresh().ok:
            raise RuntimeError("the snapshot could not be refreshed from the throughput sandbox")
        saved = use_broker(app, {"task_always_eager": False, "broker_url": pipeline.redis_url})
        pipeline.start()
        watcher = WatcherProcess(var_dir, sandbox.kubeconfig, pipeline.env)
        _wait(lambda: SnapshotState.objects.filter(last_success_at__isnull=False).exists(), 120, "the watcher's sync")
        sandbox.admin("faults", "PUT", {"latency": LATENCY_S, "max_inflight": max_inflight})
        single_s, together_s = request_times(sandbox.kubeconfig)
        log(f"throughput: one request {single_s * 1000:.1f} ms, 32 at once {together_s * 1000:.0f} ms")
        half = size // 2
        reference = KubectlRun()
        log(f"throughput: kubectl apply of {half} NamespaceOffloadings ({LATENCY_S * 1000:.0f} ms latency)")
        kubectl_apply(sandbox, by_kubectl[:half], reference)
        log(f"throughput: kubectl apply took {reference.seconds:.1f} s; now the bulk of {size}")
        worker = next(p for p in pipeline.procs if "worker" in " ".join(map(str, p.args)))
        bulk = run_bulk(sandbox, worker.pid, watcher.proc.pid, by_kubectl[:half][:50])
        log(f"throughput: bulk took {bulk.seconds:.1f} s (request {bulk.request_s:.1f} s); kubectl's other half")
        kubectl_apply(sandbox, by_kubectl[half:], reference)
        log(f"throughput: kubectl apply took {reference.seconds:.1f} s in all")
        if not refresh().ok:
            raise RuntimeError("the snapshot could not be refreshed after the bulk")
        api_s = min(api_list_all() for _ in range(3))
        kubectl_list_s = min(
            kubectl(sandbox.kubeconfig, "get", "namespaceoffloadings.offloading.liqo.io", "-A", "-o", "json")
            for _ in range(3)
        )
        request_n = sum(bulk.request_calls.values())
        worker_n = sum(bulk.calls.values()) - request_n
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
            bulk_s=round(bulk.seconds, 2),
            bulk_request_s=round(bulk.request_s, 2),
            bulk_applied=bulk.applied,
            bulk_failed=bulk.failed,
            request_calls_per_change=round(request_n / size, 2),
            worker_calls_per_change=round(worker_n / size, 2),
            calls_by_verb=bulk.calls,
            peak_inflight=bulk.peak_inflight,
            bulk_cpu_s=bulk.cpu_s,
            physical_limit_s=round(physical, 2),
            throttled=bulk.throttled,
            status_visible_p50_s=percentile(bulk.visible, 0.5),
            status_visible_p95_s=percentile(bulk.visible, 0.95),
            status_samples=len(bulk.visible),
            worker_peak_rss_mb=round(bulk.worker_peak_rss_mb, 1),
            worker_total_peak_pss_mb=round(bulk.worker_total_peak_pss_mb, 1),
            api_list_s=round(api_s, 3),
            kubectl_list_s=round(kubectl_list_s, 3),
            load_average=round(bulk.load_average, 1),
            flags=flags(reference, expected, single_s, together_s),
            bulk_checks=str(settings.LIQO_DASH["BULK_CHECKS"]),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.throughput",
        description="The throughput run alone (bulk against kubectl apply) at any size.",
    )
    parser.add_argument("--size", type=int, default=1000, help="namespaces each way (default 1,000)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as one JSON object to FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (database, logs)")
    args = parser.parse_args(argv)
    if args.size < 2:
        parser.error("--size must be at least 2 (half of it goes to each kubectl run)")
    scratch = harness.Run("liqo-dash-bench-throughput-")
    var_dir, log = scratch.var_dir, scratch.log
    try:
        harness.setup_django(var_dir)
        moved = measure(var_dir, args.size, log)
        print("\n".join(moved.lines()))
        if args.json:
            Path(args.json).write_text(json.dumps(moved.as_dict(), indent=1, sort_keys=True) + "\n")
    finally:
        scratch.end(args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
