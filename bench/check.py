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


def missing(figures: dict[str, object]) -> list[str]:
    found = [key for key in SCALARS if not isinstance(figures.get(key), int | float)]
    followed = figures.get("pods")
    if isinstance(followed, dict) and followed:  # the pods run is on unless --no-pods
        found += [f"pods[{key}]" for key in PODS if not isinstance(followed.get(key), int | float)]
    watched = figures.get("viewers")
    if isinstance(watched, dict) and watched:  # the viewers run is on unless --no-viewers
        for key in VIEWERS:
            counts = watched.get(key)
            if not isinstance(counts, dict) or not counts:
                found.append(f"viewers[{key}]")
                continue
            found += [f"viewers[{key}][{n}]" for n, value in counts.items() if not isinstance(value, int | float)]
    for key in PER_PAGE:
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
    print(f"bench: every goal measured ({len(SCALARS)} figures, {len(figures['page_p50_ratio'])} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
