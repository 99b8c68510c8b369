"""The managed-cluster fleet run (issue 28): one installation managing a domain of N consumer clusters,
each with a generated fleet of NS namespaces and K peers, against one cluster of the same total size.

    python -m bench.domain --clusters 10 --fleet 1000x20 [--json FILE]     (python -m bench --only domain)
    python -m bench.domain --quick                                         (3 x 200x5, for CI)

The domain is ``python -m sandbox serve --scenario domain:N/NSxK`` (bench/domain_parts.py), the watcher
``manage.py watch_cluster`` as the Procfile runs it (leader election on, ``LIQO_DASH_CLUSTERS`` naming
every cluster's context) on the benchmark's SQLite database. In order:

1. the watcher managing the first cluster alone: its cold sync, then its resident memory, threads and
   sockets once settled;
2. a new watcher (snapshot emptied) managing all N: the cold sync of every cluster, the same figures,
   so that (N-cluster figure - 1-cluster figure) / (N - 1) is what one more managed cluster costs; the
   API bytes each cluster served over a window where nothing changes; the snapshot's rows and bytes per
   managed cluster; status changes made in the clusters' API servers in turn, each timed until its
   cluster's snapshot row holds it;
3. one cluster of N x NS namespaces and K peers (``generated:``), the same watcher, the same figures;
4. the pages, both snapshots kept and timed side by side (alternating rounds, as bench/measures.py
   does): the fleet-wide namespace list, each cluster's namespace list and overview, against the single
   cluster's namespace list, overview and fleet-wide list. Ratio: the domain's p50 / the single
   cluster's (goal <= 1.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import harness
from bench.domain_parts import DomainSandbox, FleetWatcher, footprint, synced
from bench.sync import _p95, _stats, _wait, figure_lines

FULL = (10, 1_000, 20)  # clusters, namespaces per cluster, peers per cluster
QUICK = (3, 200, 5)
GOAL_PAGE_RATIO = 1.5
SETTLE_S = 5.0  # after a cold sync, before memory is read: the writer's last batches, the collector
# (a page's name, the domain's pages it pools, the single cluster's page it is compared with)
PAGES = (
    ("namespace list, every cluster (fleet-wide)", "fleet", "list"),
    # The same page on both: what the clusters cost it, its template and query apart.
    ("fleet-wide list against the single cluster's fleet-wide list", "fleet", "fleet"),
    ("namespace list of each cluster", "lists", "list"),
    ("overview of each cluster", "overviews", "overview"),
)


def _settings_clusters(names: list[str]) -> None:
    """The managed clusters this process's pages read as configured (``ensure_configured``)."""
    from django.conf import settings

    settings.LIQO_DASH_CLUSTERS = list(names)


def _watch(kubeconfig: Path, names: list[str], var_dir: Path, label: str, log: Any) -> tuple[FleetWatcher, float]:
    watcher = FleetWatcher(kubeconfig, names, var_dir / f"watcher-{label.replace(' ', '-')}.log")
    try:
        took = round(
            _wait(lambda: synced(names or None) or not watcher.alive(), 900, f"the cold sync ({label})", 0.1), 2
        )
    except BaseException:
        watcher.stop()
        raise
    if not watcher.alive():
        watcher.stop()
        raise RuntimeError(f"the watcher ({label}) exited:\n{watcher.log.read_text(errors='replace')[-2000:]}")
    time.sleep(SETTLE_S)
    log(f"  watcher ({label}): cold sync {took:.1f}s, {watcher.rss_mb():.0f} MB resident")
    return watcher, took


def _process_figures(watcher: FleetWatcher, prefix: str) -> dict[str, Any]:
    from django.db import connection

    return {
        f"{prefix}_rss_mb": round(watcher.rss_mb(), 1),
        f"{prefix}_threads": watcher.threads(),
        f"{prefix}_sockets": watcher.sockets(),
        f"{prefix}_db_connections": watcher.database_connections(str(connection.settings_dict["NAME"])),
    }


def _status_latency(dom: DomainSandbox, samples: int) -> list[float]:
    """A status patch of an offloading in each cluster in turn; time until that cluster's row holds it."""
    from kubernetes import client

    from offloading.models import Namespace

    names = {
        cluster: list(
            Namespace.objects.filter(managed__name=cluster, offloaded=True)
            .order_by("name")
            .values_list("name", flat=True)
        )
        for cluster in dom.names
    }
    times = []
    for i in range(samples):
        cluster = dom.names[i % len(dom.names)]
        candidates = names[cluster]
        if not candidates:
            continue
        name = candidates[(i // len(dom.names)) % len(candidates)]
        obj = client.CustomObjectsApi(dom.api(cluster)).patch_namespaced_custom_object_status(
            "offloading.liqo.io",
            "v1beta1",
            name,
            "namespaceoffloadings",
            "offloading",
            {"status": {"offloadingPhase": "SomeFailed" if i % 2 == 0 else "Ready"}},
        )
        version = int(obj["metadata"]["resourceVersion"])

        def seen(cluster: str = cluster, name: str = name, version: int = version) -> bool:
            row = (
                Namespace.objects.filter(managed__name=cluster, name=name)
                .values_list("offloading_resource_version", flat=True)
                .first()
            )
            return bool(row and row.isdigit() and int(row) >= version)

        times.append(_wait(seen, 30, f"the status of {cluster}/{name} in the snapshot"))
    return times


def _pages(names: list[str]) -> dict[str, list[str]]:
    """The domain's pages by group (PAGES): the default cluster's have no /m/<name>/ prefix."""
    from django.urls import reverse

    def base(index: int, name: str) -> str:
        return "/" if index == 0 else f"/m/{name}/"

    return {
        "fleet": [reverse("offloading:fleet_namespaces")],
        "lists": [base(i, name) + "namespaces/" for i, name in enumerate(names)],
        "overviews": [base(i, name) for i, name in enumerate(names)],
    }


def _side_by_side(domain_db: str, names: list[str], single_db: str, repeat: int) -> dict[str, Any]:
    """Every page once to warm up, then ``repeat`` rounds, each requesting every page of both snapshots
    (the database switched between them, their order alternating); the median of each group's runs."""
    from bench.measures import admin_client

    # (its database, the clusters configured with it, its test client, its pages by group, their runs)
    staged: list[tuple[str, list[str], Any, dict[str, list[str]], dict[str, list[float]]]] = []
    for database, clusters, urls in (
        (domain_db, names, _pages(names)),
        (single_db, [], {"list": ["/namespaces/"], "overview": ["/"], "fleet": _pages([])["fleet"]}),
    ):
        harness.use_database(database)
        _settings_clusters(clusters)
        web = admin_client()
        for group in urls.values():
            for url in group:
                status = web.get(url).status_code
                if status != 200:
                    raise RuntimeError(f"GET {url} answered {status}, not a page to measure")
        staged.append((database, clusters, web, urls, {key: [] for key in urls}))
    for round_ in range(repeat):
        for database, clusters, web, urls, runs in staged if round_ % 2 == 0 else staged[::-1]:
            harness.use_database(database)
            _settings_clusters(clusters)
            for key, group in urls.items():
                for url in group:
                    started = time.perf_counter()
                    web.get(url)
                    runs[key].append(time.perf_counter() - started)
    harness.use_database(None)
    domain_runs, single_runs = staged[0][4], staged[1][4]
    pages: dict[str, Any] = {}
    for title, mine, theirs in PAGES:
        ours, reference = statistics.median(domain_runs[mine]), statistics.median(single_runs[theirs])
        pages[title] = {
            "p50_ms": round(ours * 1000, 1),
            "single_p50_ms": round(reference * 1000, 1),
            "ratio": round(ours / reference, 2),
        }
    return pages


def measure(
    clusters: int,
    namespaces: int,
    peers: int,
    var_dir: Path,
    log: Any,
    *,
    samples: int = 40,
    steady_s: float = 30.0,
    repeat: int = 11,
) -> dict[str, Any]:
    """Every figure of the run (module docstring), as one flat mapping plus ``pages`` and ``tables``."""
    from offloading.models import Namespace  # Django is set up by now (harness.setup_django)

    if clusters < 2:
        raise ValueError("a fleet run needs at least two managed clusters (one more than the first)")
    figures: dict[str, Any] = {
        "domain": f"{clusters} x {namespaces}x{peers}",
        "single": f"{clusters * namespaces}x{peers}",
    }
    harness.reset_database()
    with DomainSandbox(clusters, namespaces, peers, var_dir) as dom:
        names = dom.names
        figures["sandbox_start_s"] = dom.start_s
        log(f"sandbox domain {figures['domain']} ({', '.join(names)}) started in {dom.start_s:.1f}s")
        _settings_clusters(names[:1])
        watcher, figures["cold_sync_1_s"] = _watch(dom.service_kubeconfig, names[:1], var_dir, "1 cluster", log)
        try:
            figures.update(_process_figures(watcher, "watcher_1"))
        finally:
            watcher.stop()
        figures["watcher_1_peak_rss_mb"] = round(watcher.peak_mb, 1)

        harness.reset_database()
        _settings_clusters(names)
        watcher, figures["cold_sync_n_s"] = _watch(dom.service_kubeconfig, names, var_dir, f"{clusters} clusters", log)
        try:
            figures.update(_process_figures(watcher, "watcher_n"))
            for url in dom.urls.values():
                _stats(url, "DELETE")
            time.sleep(steady_s)  # the window itself: nothing changes, each cluster's counter runs
            counted = {name: _stats(url) for name, url in dom.urls.items()}
            served = {name: int(stats["total_bytes"] * 60 / steady_s) for name, stats in counted.items()}
            home_calls = counted[names[0]].get("calls") or {}
            figures["steady_home_calls"] = home_calls  # per client and verb over the window
            figures["steady_home_requests_per_min"] = int(
                sum(sum(verbs.values()) for verbs in home_calls.values()) * 60 / steady_s
            )
            # The default cluster's API server also holds every cluster's Lease (renewed every 2 s).
            figures["steady_bytes_per_min_by_cluster"] = served
            figures["steady_bytes_per_min_per_cluster"] = int(statistics.median(served.values()))
            figures["steady_bytes_per_min_home"] = served[names[0]]
            log(f"  steady state: {served} bytes/min")
            weight = footprint(clusters)
            times = _status_latency(dom, samples)
        finally:
            watcher.stop()
        figures["watcher_n_peak_rss_mb"] = round(watcher.peak_mb, 1)
    for key in ("rss_mb", "peak_rss_mb", "threads", "sockets", "db_connections"):
        more = (figures[f"watcher_n_{key}"] - figures[f"watcher_1_{key}"]) / (clusters - 1)
        figures[f"watcher_{key}_per_cluster"] = round(more, 1)
    figures["snapshot_rows_per_cluster"] = weight["rows_per_cluster"]
    figures["snapshot_bytes_per_cluster"] = weight["bytes_per_cluster"]
    figures["database_bytes"] = weight["database_bytes"]
    figures["tables"] = weight["tables"]
    figures["status_samples"] = len(times)
    figures["status_latency_p50_s"] = round(statistics.median(times), 3) if times else None
    figures["status_latency_p95_s"] = round(_p95(times), 3) if times else None
    log(
        f"  status latency over {len(times)} changes: p50 {figures['status_latency_p50_s']}s, p95 {figures['status_latency_p95_s']}s"
    )
    domain_db = harness.keep_database(var_dir / "domain.sqlite3")

    harness.reset_database()
    _settings_clusters([])
    with harness.Fleet(clusters * namespaces, peers, var_dir) as fleet:
        log(f"single cluster {figures['single']} started in {fleet.startup_s:.1f}s")
        watcher, figures["single_cold_sync_s"] = _watch(fleet.service_kubeconfig, [], var_dir, "single", log)
        try:
            figures.update(_process_figures(watcher, "single_watcher"))
        finally:
            watcher.stop()
        figures["single_watcher_peak_rss_mb"] = round(watcher.peak_mb, 1)
    single = footprint(1)
    figures["single_snapshot_rows"], figures["single_snapshot_bytes"] = (
        single["rows_per_cluster"],
        single["bytes_per_cluster"],
    )
    figures["single_namespaces"] = Namespace.objects.count()
    single_db = harness.keep_database(var_dir / "single.sqlite3")
    harness.use_database(domain_db)
    figures["domain_namespaces"] = Namespace.objects.count()
    harness.use_database(None)

    figures["pages"] = _side_by_side(domain_db, names, single_db, repeat)
    figures["page_p50_ratio"] = {title: page["ratio"] for title, page in figures["pages"].items()}
    log(f"  pages measured side by side, {repeat} rounds")
    _settings_clusters([])
    harness.reset_database()
    return figures


def lines(figures: dict[str, Any]) -> list[str]:
    out = [
        f"Managed-cluster fleet ({figures['domain']}: one sandbox domain, the watcher managing every cluster; "
        f"against one cluster of {figures['single']}):"
    ]
    out += figure_lines(
        figures,
        {},
        (
            "sandbox_start_s",
            "cold_sync_1_s",
            "cold_sync_n_s",
            "single_cold_sync_s",
            "watcher_1_rss_mb",
            "watcher_n_rss_mb",
            "watcher_rss_mb_per_cluster",
            "watcher_1_peak_rss_mb",
            "watcher_n_peak_rss_mb",
            "watcher_peak_rss_mb_per_cluster",
            "single_watcher_rss_mb",
            "single_watcher_peak_rss_mb",
            "watcher_threads_per_cluster",
            "watcher_sockets_per_cluster",
            "watcher_1_db_connections",
            "watcher_n_db_connections",
            "watcher_db_connections_per_cluster",
            "steady_bytes_per_min_per_cluster",
            "steady_bytes_per_min_home",
            "steady_home_requests_per_min",
            "snapshot_rows_per_cluster",
            "snapshot_bytes_per_cluster",
            "single_snapshot_rows",
            "single_snapshot_bytes",
            "domain_namespaces",
            "single_namespaces",
            "status_samples",
            "status_latency_p50_s",
            "status_latency_p95_s",
        ),
        34,
    )
    for title, page in figures.get("pages", {}).items():
        verdict = "meets" if page["ratio"] <= GOAL_PAGE_RATIO else "MISSES"
        out.append(
            f"  page p50 {title}: {page['p50_ms']} ms against {page['single_p50_ms']} ms, "
            f"x{page['ratio']}   goal <= {GOAL_PAGE_RATIO:g}: {verdict}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.domain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, help=f"managed clusters in the domain (default {FULL[0]})")
    parser.add_argument(
        "--fleet",
        type=harness.fleet_size,
        metavar="NSxPEERS",
        help=f"each cluster's fleet (default {FULL[1]}x{FULL[2]})",
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK[0]} x {QUICK[1]}x{QUICK[2]}, short windows (CI)")
    parser.add_argument(
        "--samples", type=int, help="status changes timed, spread over the clusters (default 40; 12 quick)"
    )
    parser.add_argument(
        "--steady", type=float, help="seconds of the window where nothing changes (default 30; 10 quick)"
    )
    parser.add_argument("--repeat", type=int, default=11, help="rounds of the pages side by side (median shown)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (databases, logs)")
    args = parser.parse_args(argv)
    clusters, namespaces, peers = QUICK if args.quick else FULL
    if args.clusters is not None:
        clusters = args.clusters
    if args.fleet is not None:
        namespaces, peers = args.fleet
    if clusters < 2:
        parser.error("--clusters: at least 2")
    scratch = harness.Run("liqo-dash-bench-domain-")
    var_dir, log = scratch.var_dir, scratch.log
    try:
        harness.setup_django(var_dir)
        figures = measure(
            clusters,
            namespaces,
            peers,
            var_dir,
            log,
            samples=args.samples or (12 if args.quick else 40),
            steady_s=args.steady or (10.0 if args.quick else 30.0),
            repeat=max(1, args.repeat),
        )
        print("\n".join(lines(figures)))
        print(f"\n(total {scratch.elapsed():.0f} s)")
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))
    finally:
        scratch.end(args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
