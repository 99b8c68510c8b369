"""Following pods at fleet scale: what the watcher pays to know where the pods of offloaded namespaces run.

Liqo gives no label that selects the pods of offloaded namespaces (its webhook adds a toleration and an
affinity; only pods bound to a virtual node get ``liqo.io/shadowPod``), and one watch per offloaded
namespace would hold a connection each (1,000 at 10,000 namespaces with 10 % offloaded). The watcher
keeps one cluster-wide pod watch and drops, as they arrive, the pods of namespaces that are not
offloaded. This run measures what that costs on a fleet with pods in every namespace:

* the cold sync (LIST of every pod) and how many pods are kept, against how many there are;
* the bytes per minute read while nothing changes (bookmarks only);
* the bytes per pod event in a namespace that is not offloaded (read, then dropped): the price of the
  cluster-wide watch, paid per pod churned elsewhere;
* how long a new pod of an offloaded namespace takes to reach the snapshot (p95);
* the watcher's peak memory.

The churn is made with another identity (the sandbox admin) than the watcher's (the dashboard's
service account), so the sandbox's per-client byte counter holds only what the watcher read."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench import harness
from bench.sync import Watcher, _p95, _stats, _wait, figure_lines

GOALS = {"pods_steady_bytes_per_min": 1_000_000, "pod_visible_p95_s": 1.0}


def _watcher_bytes(url: str) -> int:
    from sandbox.rbac import SERVICE_USER

    return int(((_stats(url).get("clients") or {}).get(SERVICE_USER) or {}).get("bytes", 0))


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "bench-churn"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "resources": {"requests": {"cpu": "10m"}}}]},
    }


def measure(
    namespaces: int, clusters: int, pods: int, churn: int, var_dir: Path, log: Any, steady_s: float = 60.0
) -> dict[str, Any]:
    from kubernetes import client

    from offloading.models import Namespace, SnapshotState
    from offloading.models.inventory import Pod

    harness.reset_database()
    figures: dict[str, Any] = {"pods_fleet": f"{namespaces}x{clusters}, {pods} pods per namespace"}
    with harness.Fleet(namespaces, clusters, var_dir, pods=pods) as fleet:
        figures["pods_sandbox_start_s"] = round(fleet.startup_s, 2)
        log(f"sandbox {namespaces}x{clusters} with {namespaces * pods} pods started in {fleet.startup_s:.1f}s")
        _stats(fleet.url, "DELETE")
        watcher = Watcher(fleet, var_dir, kubeconfig=fleet.service_kubeconfig)
        core = client.CoreV1Api(fleet._api())  # the sandbox admin: not counted as the watcher's bytes
        try:
            figures["pods_cold_sync_s"] = round(
                _wait(
                    lambda: SnapshotState.objects.filter(last_success_at__isnull=False).exists(), 900, "cold sync", 0.1
                ),
                2,
            )
            figures["pods_cold_sync_bytes"] = _watcher_bytes(fleet.url)
            offloaded = list(Namespace.objects.filter(offloaded=True).order_by("name").values_list("name", flat=True))
            others = list(Namespace.objects.filter(offloaded=False, name__regex=r"-\d{5}$").order_by("name")[:churn])
            figures["pods_in_cluster"] = namespaces * pods
            figures["pods_expected"] = len(offloaded) * pods
            figures["pods_followed"] = Pod.objects.count()
            log(
                f"cold sync {figures['pods_cold_sync_s']}s, {figures['pods_cold_sync_bytes'] / 1e6:.1f} MB; "
                f"{figures['pods_followed']} pods followed of {figures['pods_in_cluster']} "
                f"({figures['pods_expected']} in offloaded namespaces)"
            )
            _stats(fleet.url, "DELETE")
            time.sleep(steady_s)  # the measured window: nothing changes
            figures["pods_steady_bytes_per_min"] = int(_watcher_bytes(fleet.url) * 60 / steady_s)

            # Churn where nothing is offloaded: every event is read and dropped.
            _stats(fleet.url, "DELETE")
            names = [ns.name for ns in others]
            for name in names:
                core.create_namespaced_pod(name, _pod("bench-churn"))
            for name in names:
                core.delete_namespaced_pod("bench-churn", name, grace_period_seconds=0)
            time.sleep(2.0)  # let the watch deliver the last events before reading the counter
            events = 2 * len(names)
            figures["foreign_pod_event_bytes"] = int(_watcher_bytes(fleet.url) / events) if events else None
            leaked = Pod.objects.filter(namespace__in=names).count()
            figures["foreign_pods_kept"] = leaked

            # A new pod of an offloaded namespace: until the snapshot holds it.
            times = []
            for name in offloaded[:churn]:
                core.create_namespaced_pod(name, _pod("bench-seen"))
                times.append(
                    _wait(
                        lambda n=name: Pod.objects.filter(namespace=n, name="bench-seen").exists(), 30, f"pod in {name}"
                    )
                )
            figures["pod_visible_p50_s"] = round(statistics.median(times), 3) if times else None
            figures["pod_visible_p95_s"] = round(_p95(times), 3) if times else None
            log(
                f"pods: steady {figures['pods_steady_bytes_per_min']} B/min, "
                f"{figures['foreign_pod_event_bytes']} B per dropped event, "
                f"visible p95 {figures['pod_visible_p95_s']}s"
            )
        finally:
            watcher.stop()
        figures["pods_watcher_peak_rss_mb"] = round(watcher.peak_mb, 1)
    return figures


def lines(figures: dict[str, Any]) -> list[str]:
    out = [f"Pods of offloaded namespaces ({figures['pods_fleet']}; one cluster-wide watch, filtered on arrival):"]
    out += figure_lines(
        figures,
        GOALS,
        (
            "pods_in_cluster",
            "pods_expected",
            "pods_followed",
            "foreign_pods_kept",
            "pods_sandbox_start_s",
            "pods_cold_sync_s",
            "pods_cold_sync_bytes",
            "foreign_pod_event_bytes",
            "pod_visible_p50_s",
            "pods_watcher_peak_rss_mb",
        ),
        26,
    )
    if figures.get("pods_followed") != figures.get("pods_expected") or figures.get("foreign_pods_kept"):
        out.append("  MISMATCH: the pods followed are not exactly those of offloaded namespaces")
    return out
