"""Open pages: N viewers polling the live pages of one web pod, while nothing changes and while a
100-namespace bulk offload applies.

The processes are the Procfile's (bench/viewers_pod.py): the web process (the Procfile's command as it
is: gunicorn with deploy/gunicorn.conf.py, whose settings GUNICORN_CMD_ARGS in the environment
overrides), a Celery worker and beat on Redis, and the watcher
keeping the snapshot of the sandbox's ``generated:NxK`` fleet (its cold sync first; the sandbox's Liqo
controller is frozen, so nothing moves unless the benchmark moves it), on the benchmark's SQLite
database. Each viewer is a browser tab as static/js/liqo-dash.js drives it: one live region (namespace
list, matrix or cluster list every 2 s; overview, a cluster's page or the audit trail every 5 s; a
namespace's status every 2 s, until it answers 286 as htmx does), polled with ``X-Live-Poll`` and the
ETag it got, plus the freshness badge every 10 s. The load generator is asyncio on loopback; each
viewer keeps a connection open for its region and one for its badge, as a browser does
(``--connection-per-request``: a new connection for every request, as before the web process kept
them), bounded in viewers and time.

For each count of viewers, the tabs open their pages, then keep polling through two windows without a
gap: **idle** (``--window`` seconds, nothing changes but the watcher's heartbeat) and **bulk** (from
``POST /api/v1/bulk/`` of 100 namespaces not offloaded, sent as a client would, until the worker applied
every change and the watcher brought every NamespaceOffloading into the snapshot). The bulk runs once
with no viewer first: what the bulk itself costs the web pod (its request's access reviews and dry-runs).

    python -m bench.viewers [--fleet 10000x200] [--viewers 50 --viewers 200 --viewers 500] [--window 30]

Figures per viewer count and window: p50/p95/max of the polls started in the window, how many were 304,
which regions rendered, and the web pod's CPU (utime + stime of gunicorn's master and workers,
/proc/<pid>/stat) over the window: cores used, and microseconds of CPU per second per viewer; the
machine's load average at the window's end (other work shares its cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import harness
from bench.viewers_load import ViewersRun, run
from bench.viewers_pod import BULK_SIZE, BulkRun, Deployment, WebPod, candidates, sessions

GOAL_P95_MS = 200.0
GOAL_VIEWERS = 500


# --------------------------------------------------------------------------------------------------
# The web pod: the Procfile's web command as it is


def procfile_web(port: int) -> list[str]:
    """The Procfile's web command, bound to 127.0.0.1:``port``, run with this interpreter."""
    line = next(x for x in (harness.ROOT / "Procfile").read_text().splitlines() if x.startswith("web:"))
    words = shlex.split(line.partition(":")[2].replace("${PORT:-8000}", str(port)).replace("0.0.0.0", "127.0.0.1"))
    return [sys.executable, "-m", *words] if words[0] == "gunicorn" else words


class ProcfileWebPod(WebPod):
    """viewers_pod.WebPod started with the Procfile's web command (no flags of the benchmark's own: the
    workers, threads, keep-alive and access log are deploy/gunicorn.conf.py's, or GUNICORN_CMD_ARGS's)."""

    def __init__(self, var_dir: Path, **extra_env: str) -> None:
        super().__init__(var_dir, procfile_web, **extra_env)


def _bulks(deployment: Deployment, port: int, size: int, repeats: int) -> BulkRun:
    """``repeats`` bulks of ``size`` namespaces one after the other, as one window (more polls under the
    same load than one bulk's 1-3 s give, so that its p95 rests on more than a handful of them): their
    sums, but for the first POST's time (``posting_p95_ms`` splits the window at it)."""
    found = [deployment.bulk(port, size) for _ in range(repeats)]
    first = found[0]
    return BulkRun(
        namespaces=sum(b.namespaces for b in found),
        request_s=first.request_s,
        applied_s=round(sum(b.applied_s for b in found), 2),
        visible_s=round(sum(b.visible_s for b in found), 2),
        applied=sum(b.applied for b in found),
        failed=sum(b.failed for b in found),
        worker_cpu_s=round(sum(b.worker_cpu_s for b in found), 2),
        watcher_cpu_s=round(sum(b.watcher_cpu_s for b in found), 2),
    )


def measure(
    namespaces: int,
    clusters: int,
    var_dir: Path,
    counts: list[int],
    window_s: float,
    log: Callable[[str], None],
    bulk: bool = True,
    keep_alive: bool = True,
    per_request_run: bool = True,
    compare: list[str] | None = None,
    repeats: int = 1,
) -> dict[str, Any]:
    """The fleet in the sandbox, the deployment's processes (the watcher's cold sync), then the web pod
    and each count of viewers: idle, then while a bulk applies (after the bulk alone, with no viewer)."""
    harness.reset_database()
    runs: list[ViewersRun] = []
    per_request: list[ViewersRun] = []
    compared: list[ViewersRun] = []
    alone: list[ViewersRun] = []
    with harness.Fleet(namespaces, clusters, var_dir) as fleet:
        log(f"viewers: sandbox with {fleet.label} up; the worker, beat and watcher start")
        deployment = Deployment(fleet, var_dir, log)
        try:
            cookies = sessions(max(counts))
            bulks = (1 + len(counts) + 1 + len(compare or [])) * repeats if bulk else 0
            size = min(BULK_SIZE, len(candidates()) // max(1, bulks))
            if bulk and size < 1:
                raise RuntimeError("no namespace left to offload in the bulk windows")

            def idle() -> None:
                time.sleep(window_s)

            # The Procfile's web process as it is (database connections kept: DATABASE_CONN_MAX_AGE 60 by
            # default), then the most viewers again with a connection per request (DATABASE_CONN_MAX_AGE=0).
            for extra, counted, found in (
                ({}, counts, runs),
                *([({"DATABASE_CONN_MAX_AGE": "0"}, counts[-1:], per_request)] if per_request_run else []),
            ):
                pod = ProcfileWebPod(var_dir, **deployment.web_env(), **extra)

                def offload(pod: WebPod = pod) -> BulkRun:
                    return _bulks(deployment, pod.port, size, repeats)

                windows: list[tuple[str, Callable[[], Any]]] = [("idle", idle)] + ([("bulk", offload)] if bulk else [])
                try:
                    if bulk and not extra:
                        alone += run(pod, [], [("bulk", offload)], log, keep_alive)
                        log(f"the bulk alone: {alone[0].bulk}; web {alone[0].web_cpu_s:.1f} s CPU")
                    for count in counted:
                        for item in run(pod, cookies[:count], windows, log, keep_alive):
                            log(item.line() + (" (DATABASE_CONN_MAX_AGE=0)" if extra else ""))
                            found.append(item)
                finally:
                    pod.stop()
            # The most viewers idle again on web processes with other settings (GUNICORN_CMD_ARGS), one
            # after the other on the same fleet: list one twice around another to see the machine's drift.
            for args in compare or []:
                pod = ProcfileWebPod(var_dir, **deployment.web_env(), GUNICORN_CMD_ARGS=args)

                def offload_compared(pod: WebPod = pod) -> BulkRun:
                    return _bulks(deployment, pod.port, size, repeats)

                compared_windows = [("idle", idle)] + ([("bulk", offload_compared)] if bulk else [])
                try:
                    for item in run(pod, cookies[: counts[-1]], compared_windows, log, keep_alive):
                        item.web_args = args
                        log(item.line())
                        compared.append(item)
                finally:
                    pod.stop()
        finally:
            deployment.stop()
    idle_runs = [r for r in runs if r.phase == "idle"]
    bulk_runs = [r for r in runs if r.phase == "bulk"]
    return {
        "fleet": f"{namespaces}x{clusters}",
        "runs": [asdict(r) for r in idle_runs],
        "bulk_runs": [asdict(r) for r in bulk_runs],
        "bulk_alone": asdict(alone[0]) if alone else None,
        "per_request_connections": [asdict(r) for r in per_request],
        "compared": [asdict(r) for r in compared],
        "viewers_p95_ms": {str(r.viewers): r.p95_ms for r in idle_runs},
        "idle_viewer_cpu_us_per_s": {str(r.viewers): r.cpu_us_per_viewer_s for r in idle_runs},
        "bulk_viewers_p95_ms": {str(r.viewers): r.p95_ms for r in bulk_runs},
        "bulk_viewer_cpu_us_per_s": {str(r.viewers): r.cpu_us_per_viewer_s for r in bulk_runs},
        "cpu_count": os.cpu_count(),
        "web_command": " ".join(procfile_web(0)[2:]).replace("127.0.0.1:0", "127.0.0.1:PORT"),
        "gunicorn_cmd_args": os.environ.get("GUNICORN_CMD_ARGS", ""),
        "keep_alive": keep_alive,
    }


def table(figures: dict[str, Any]) -> list[str]:
    """Idle and during the bulk side by side, per viewer count (markdown)."""
    bulk = {r["viewers"]: r for r in figures.get("bulk_runs") or []}
    out = [
        "| viewers | idle p50 / p95 | idle web CPU per viewer | bulk p50 / p95 | bulk web CPU per viewer "
        "| bulk window | regions rendered / shared in it | web memory | load average (idle, bulk) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for item in figures.get("runs") or []:
        cells = [
            str(item["viewers"]),
            f"{item['p50_ms']:.0f} / {item['p95_ms']:.0f} ms",
            f"{item['cpu_us_per_viewer_s']:,.0f} µs/s ({item['web_cores']:.2f} cores)",
        ]
        busy = bulk.get(item["viewers"])
        if busy:
            regions = {k: n for k, n in busy["per_region_rendered"].items() if k != "freshness badge"}
            cells += [
                f"{busy['p50_ms']:.0f} / {busy['p95_ms']:.0f} ms",
                f"{busy['cpu_us_per_viewer_s']:,.0f} µs/s ({busy['web_cores']:.2f} cores)",
                f"{busy['window_s']:.0f} s",
                f"{sum(regions.values())} / {sum(busy.get('per_region_shared', {}).values())}",
                f"{busy.get('web_rss_mb', 0):.0f} MiB",
                f"{item['load_average']:.1f}, {busy['load_average']:.1f}",
            ]
        else:
            cells += ["", "", "", "", f"{item.get('web_rss_mb', 0):.0f} MiB", f"{item['load_average']:.1f}"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def lines(figures: dict[str, Any]) -> list[str]:
    out = [
        f"Open pages, one web pod ({figures.get('web_command')}"
        f"{', GUNICORN_CMD_ARGS=' + repr(figures['gunicorn_cmd_args']) if figures.get('gunicorn_cmd_args') else ''}), "
        f"fleet {figures.get('fleet')}, {figures.get('cpu_count')} cores, "
        f"{'kept-alive connections' if figures.get('keep_alive', False) else 'a connection per request'}; "
        "idle, then while a bulk offload applies:"
    ]
    alone = figures.get("bulk_alone")
    if alone:
        out.append(f"  the bulk with no viewer: {alone['bulk']}; web {alone['web_cores']:.2f} cores")
    for key, note in (
        ("runs", ""),
        ("bulk_runs", ""),
        ("per_request_connections", " (DATABASE_CONN_MAX_AGE=0)"),
        ("compared", ""),
    ):
        for item in figures.get(key) or []:
            run_ = ViewersRun(**item)
            goal = ""
            if run_.viewers >= GOAL_VIEWERS:
                goal = f"  [{'meets' if run_.p95_ms <= GOAL_P95_MS else 'MISSES'} p95 <= {GOAL_P95_MS:.0f} ms]"
            out.append("  " + run_.line() + note + goal)
            if run_.phase == "bulk":
                out.append(
                    f"      p95 while the POST was in flight {run_.posting_p95_ms:.0f} ms, after it "
                    f"{run_.applying_p95_ms:.0f} ms; rendered {sum(run_.per_region_rendered.values())}, another "
                    f"viewer's render {sum(run_.per_region_shared.values())}; rendered per region "
                    f"{run_.per_region_rendered}; shared {run_.per_region_shared}; p95 per region {run_.per_region_p95_ms}"
                )
    return [*out, "", *table(figures)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.viewers", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fleet", type=harness.fleet_size, default=(1000, 20), help="NAMESPACESxCLUSTERS (default 1000x20)"
    )
    parser.add_argument("--viewers", type=int, action="append", help="viewer counts (repeatable); default 50, 200")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of idle polling per count (default 20)")
    parser.add_argument("--no-bulk", dest="bulk", action="store_false", help="only the idle windows")
    parser.add_argument(
        "--bulks",
        type=int,
        default=3,
        help="bulks of 100 namespaces one after the other in each bulk window (default 3; 1: one bulk)",
    )
    parser.add_argument(
        "--connection-per-request",
        dest="keep_alive",
        action="store_false",
        help="a new connection for every request (by default each viewer keeps its connections, as a browser)",
    )
    parser.add_argument(
        "--no-per-request-connections",
        dest="per_request_run",
        action="store_false",
        help="skip the extra run of the most viewers with DATABASE_CONN_MAX_AGE=0",
    )
    parser.add_argument(
        "--compare",
        metavar="GUNICORN_CMD_ARGS",
        action="append",
        help="then the most viewers (idle, then during a bulk unless --no-bulk) on a web process with these "
        "settings (repeatable; '' for the defaults)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (database, logs)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE ('-': stdout)")
    args = parser.parse_args(argv)
    namespaces, clusters = args.fleet
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="liqo-dash-bench-viewers-"))
    try:
        harness.setup_django(tmp)
        figures = measure(
            namespaces,
            clusters,
            tmp,
            args.viewers or [50, 200],
            args.window,
            log,
            bulk=args.bulk,
            keep_alive=args.keep_alive,
            per_request_run=args.per_request_run,
            compare=args.compare,
            repeats=max(1, args.bulks),
        )
    finally:
        if args.keep:
            log(f"kept {tmp} (database, logs)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(lines(figures)))
    if args.json == "-":
        print(json.dumps(figures, indent=2))
    elif args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
