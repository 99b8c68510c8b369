"""The informer-style sync on one fleet: the sandbox's start, the watcher's cold sync and peak memory,
the API bytes it reads per minute while nothing changes (the sandbox's per-client counter), and how
long a status change in the cluster takes to reach the snapshot.

The watcher is ``manage.py watch_cluster`` in its own process (as deployed), on the benchmark's SQLite
database; the sandbox is ``python -m sandbox serve`` (harness.Fleet) with its controllers frozen."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import harness

GOALS = {
    "sandbox_start_s": 5.0,
    "steady_bytes_per_min": 1_000_000,
    "status_latency_p95_s": 1.0,
    "watcher_peak_rss_mb": 250.0,
}


def _rss_mb(pid: int, field: str = "VmHWM") -> float:
    """A process's peak (VmHWM) or current (VmRSS) resident set, in MB (Linux /proc)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) / 1024 if match else 0.0


def _stats(url: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(f"{url}/sandbox/stats", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        return dict(json.loads(response.read()))


def _wait(predicate: Any, timeout: float, what: str, interval: float = 0.01) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)  # polling the snapshot, not synchronising: the deadline bounds it
    return time.monotonic() - started


class WatcherProcess:
    """``manage.py watch_cluster ARGS`` in its own process (as deployed), its environment ``env``, its
    output in ``log``, its peak memory sampled while it runs (its VmHWM read again at the stop)."""

    stop_wait_s = 20.0  # how long it may take to stop on SIGTERM before it is killed

    def __init__(self, env: dict[str, str], log: Path, *args: str) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "watch_cluster", *args],
                cwd=harness.ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_mb = max(self.peak_mb, _rss_mb(self.proc.pid))

    def stop(self) -> None:
        self.peak_mb = max(self.peak_mb, _rss_mb(self.proc.pid))
        self._stop.set()
        harness.stop_process(self.proc, self.stop_wait_s)
        self._sampler.join(5)


class Watcher(WatcherProcess):
    """``manage.py watch_cluster`` against the fleet, without leader election."""

    def __init__(self, fleet: harness.Fleet, var_dir: Path, kubeconfig: Path | None = None) -> None:
        env = dict(
            os.environ,
            KUBECONFIG=str(kubeconfig or fleet.kubeconfig),
            KUBE_CONFIG_MODE="kubeconfig",
            LIQO_DASH_LEADER_ELECTION="false",
        )
        super().__init__(env, var_dir / "watcher.log", "--timeout-seconds", "300")


def _status_latency(fleet: harness.Fleet, samples: int, log: Any, flip: int = 0) -> list[float]:
    """Patch the status of an offloading in the cluster; time until the snapshot holds that version."""
    from kubernetes import client

    from offloading.models import Namespace

    custom = client.CustomObjectsApi(fleet._api())
    names = list(Namespace.objects.filter(offloaded=True).order_by("name").values_list("name", flat=True)[:samples])
    times = []
    for i, name in enumerate(names):
        phase = "SomeFailed" if (i + flip) % 2 == 0 else "Ready"
        obj = custom.patch_namespaced_custom_object_status(
            "offloading.liqo.io",
            "v1beta1",
            name,
            "namespaceoffloadings",
            "offloading",
            {"status": {"offloadingPhase": phase}},
        )
        version = int(obj["metadata"]["resourceVersion"])

        def seen(name: str = name, version: int = version) -> bool:
            row = Namespace.objects.filter(name=name).values_list("offloading_resource_version", flat=True).first()
            return bool(row and row.isdigit() and int(row) >= version)

        times.append(_wait(seen, 30, f"the status of {name} in the snapshot"))
    log(f"status latency over {len(times)} changes: p50 {statistics.median(times):.3f}s, max {max(times):.3f}s")
    return times


def _burst(fleet: harness.Fleet, count: int, done: threading.Event) -> threading.Thread:
    """Offload ``count`` namespaces at once (8 clients in parallel), as a bulk would, in the background."""
    from concurrent.futures import ThreadPoolExecutor

    from kubernetes import client

    from offloading.models import Namespace

    custom = client.CustomObjectsApi(fleet._api())
    names = list(Namespace.objects.filter(offloaded=False).order_by("name").values_list("name", flat=True)[:count])
    body = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading"},
        "spec": {"podOffloadingStrategy": "LocalAndRemote"},
    }

    def create(name: str) -> None:
        custom.create_namespaced_custom_object("offloading.liqo.io", "v1beta1", name, "namespaceoffloadings", body)

    def run() -> None:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, names))
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] if ordered else 0.0


def measure(
    namespaces: int, clusters: int, var_dir: Path, steady_s: float, samples: int, log: Any, bulk: int = 1000
) -> dict[str, Any]:
    """The sync figures; the status latency is measured quiet, then while ``bulk`` offloadings are created."""
    from offloading.models import SnapshotState

    harness.reset_database()
    figures: dict[str, Any] = {"fleet": f"{namespaces}x{clusters}"}
    with harness.Fleet(namespaces, clusters, var_dir) as fleet:
        started = re.search(r"\(started in ([\d.]+)s\)", (var_dir / f"fleet-{namespaces}x{clusters}.log").read_text())
        figures["sandbox_start_s"] = float(started.group(1)) if started else fleet.startup_s
        log(f"sandbox {namespaces}x{clusters} started in {figures['sandbox_start_s']:.2f}s")
        _stats(fleet.url, "DELETE")
        watcher = Watcher(fleet, var_dir)
        try:
            figures["cold_sync_s"] = _wait(
                lambda: SnapshotState.objects.filter(last_success_at__isnull=False).exists(), 600, "the cold sync", 0.1
            )
            figures["cold_sync_bytes"] = _stats(fleet.url)["total_bytes"]
            log(f"cold sync {figures['cold_sync_s']:.1f}s, {figures['cold_sync_bytes'] / 1e6:.1f} MB read")
            _stats(fleet.url, "DELETE")
            time.sleep(steady_s)  # the measured window itself: nothing changes, the counter runs
            figures["steady_bytes_per_min"] = int(_stats(fleet.url)["total_bytes"] * 60 / steady_s)
            log(f"steady state: {figures['steady_bytes_per_min']} bytes/min over {steady_s:.0f}s")
            latencies = _status_latency(fleet, samples, log)
            figures["status_latency_p50_s"] = statistics.median(latencies)
            done = threading.Event()
            burst = _burst(fleet, bulk, done)
            during: list[float] = []
            rounds = 1
            while not done.is_set() or len(during) < samples:  # samples spread over the whole bulk
                during += _status_latency(fleet, 10, log, flip=rounds)
                rounds += 1
                if rounds > 1000:
                    break
            burst.join(300)
            figures["status_latency_quiet_p95_s"] = _p95(latencies)
            figures["status_latency_bulk_p95_s"] = _p95(during)
            figures["status_latency_bulk_max_s"] = max(during) if during else None
            figures["status_latency_p95_s"] = max(_p95(latencies), _p95(during))
            figures["bulk_created"] = bulk if done.is_set() else None
        finally:
            watcher.stop()
        figures["watcher_peak_rss_mb"] = round(watcher.peak_mb, 1)
    return figures


def figure_lines(figures: dict[str, Any], goals: dict[str, float], others: tuple[str, ...], width: int) -> list[str]:
    """Each goal's figure with "meets" or "MISSES", then the other figures, one per line."""
    out = []
    for key, goal in goals.items():
        value = figures.get(key)
        verdict = "not measured" if value is None else ("meets" if value <= goal else "MISSES")
        out.append(f"  {key:<{width}} {value!s:>12}   goal <= {goal:g}: {verdict}")
    return out + [f"  {key:<{width}} {figures[key]!s:>12}" for key in others if key in figures]


def lines(figures: dict[str, Any]) -> list[str]:
    out = [f"Informer-style sync ({figures['fleet']}, watcher process, sandbox per-client byte counter):"]
    return out + figure_lines(
        figures,
        GOALS,
        (
            "cold_sync_s",
            "cold_sync_bytes",
            "status_latency_p50_s",
            "status_latency_quiet_p95_s",
            "status_latency_bulk_p95_s",
            "status_latency_bulk_max_s",
            "bulk_created",
        ),
        24,
    )
