"""``python -m bench.check FILE``: fail when a ``python -m bench --json FILE`` run left a goal's figure
unmeasured (null), so CI notices a benchmark that stopped working. It never judges the figures
themselves: times on a shared CI machine are not a verdict (the report's GOALS lines are)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCALARS = (
    "steady_bytes_per_min",
    "status_latency_p95_s",
    "bulk_vs_kubectl_ratio",
    "worker_peak_rss_mb",
    "watcher_peak_rss_mb",
    "sandbox_start_s",
    "api_list_vs_kubectl_ratio",
)
PER_PAGE = ("page_p50_ratio", "cold_page_ms")
PODS = ("pods_steady_bytes_per_min", "pod_visible_p95_s", "foreign_pod_event_bytes", "pods_followed")
VIEWERS = ("viewers_p95_ms", "idle_viewer_cpu_us_per_s")  # per viewer count
# The managed-cluster fleet run's (bench/domain.py): what one more managed cluster costs, and its pages.
DOMAIN = (
    "watcher_rss_mb_per_cluster",
    "snapshot_rows_per_cluster",
    "snapshot_bytes_per_cluster",
    "steady_bytes_per_min_per_cluster",
    "status_latency_p95_s",
)
# The throughput run's own figures: the honest reference and the bulk's calls, in flight and limit.
THROUGHPUT = (
    "kubectl_apply_s",
    "kubectl_expected_s",
    "kubectl_calls_per_object",
    "request_single_s",
    "concurrent_32_s",
    "bulk_s",
    "request_calls_per_change",
    "worker_calls_per_change",
    "kube_max_inflight",
    "peak_inflight",
    "physical_limit_s",
    "bulk_vs_kubectl_expected_ratio",
    "status_visible_p95_s",
)
# Which part of a run measures each figure (``python -m bench --only`` runs some of them; the JSON's
# ``runs`` says which): a figure of a part that did not run is not missing.
MEASURED_BY = {
    "steady_bytes_per_min": ("sync",),
    "status_latency_p95_s": ("sync", "throughput"),
    "bulk_vs_kubectl_ratio": ("throughput",),
    "worker_peak_rss_mb": ("pages", "throughput"),
    "watcher_peak_rss_mb": ("sync",),
    "sandbox_start_s": ("pages", "sync"),
    "api_list_vs_kubectl_ratio": ("throughput",),
    "page_p50_ratio": ("pages",),
    "cold_page_ms": ("pages",),
}


def missing(figures: dict[str, object]) -> list[str]:
    runs = figures.get("runs")
    ran = set(runs) if isinstance(runs, list) else None  # None: an older JSON, every part ran

    def expected(key: str) -> bool:
        return ran is None or bool(ran & set(MEASURED_BY.get(key, ())))

    found = [key for key in SCALARS if expected(key) and not isinstance(figures.get(key), int | float)]
    followed = figures.get("pods")
    if isinstance(followed, dict) and followed:  # the pods run is on unless --no-pods
        found += [f"pods[{key}]" for key in PODS if not isinstance(followed.get(key), int | float)]
    moved = figures.get("throughput")
    if isinstance(moved, dict) and moved:
        found += [f"throughput[{key}]" for key in THROUGHPUT if not isinstance(moved.get(key), int | float)]
    elif ran is not None and "throughput" in ran:
        found.append("throughput")
    fleetwide = figures.get("domain")
    if isinstance(fleetwide, dict) and fleetwide:
        found += [f"domain[{key}]" for key in DOMAIN if not isinstance(fleetwide.get(key), int | float)]
        ratios = fleetwide.get("page_p50_ratio")
        if not isinstance(ratios, dict) or not ratios:
            found.append("domain[page_p50_ratio]")
        else:
            found += [
                f"domain[page_p50_ratio][{name}]"
                for name, value in ratios.items()
                if not isinstance(value, int | float)
            ]
    elif ran is not None and "domain" in ran:
        found.append("domain")
    watched = figures.get("viewers")
    if isinstance(watched, dict) and watched:  # the viewers run is on unless --no-viewers
        for key in VIEWERS:
            counts = watched.get(key)
            if not isinstance(counts, dict) or not counts:
                found.append(f"viewers[{key}]")
                continue
            found += [f"viewers[{key}][{n}]" for n, value in counts.items() if not isinstance(value, int | float)]
    for key in PER_PAGE:
        if not expected(key):
            continue
        pages = figures.get(key)
        if not isinstance(pages, dict) or not pages:
            found.append(key)
            continue
        found += [f"{key}[{name}]" for name, value in pages.items() if not isinstance(value, int | float)]
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    figures = json.loads(Path(argv[0]).read_text())
    gaps = missing(figures)
    if gaps:
        print("bench: not measured: " + ", ".join(gaps), file=sys.stderr)
        return 1
    pages = figures.get("page_p50_ratio") or {}
    print(f"bench: every goal of the parts run measured ({len(SCALARS)} figures, {len(pages)} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
