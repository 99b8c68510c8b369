"""Open pages at rest: N viewers polling the live pages of one web pod while nothing changes.

The web process is the Procfile's (gunicorn with deploy/gunicorn.conf.py, 2 workers x 4 threads) on
the benchmark's SQLite database holding a generated fleet (the sandbox's ``generated:NxK``, read once
by the cold refresh; the sandbox is stopped before the viewers start, so nothing moves but the
snapshot's heartbeat, which the benchmark writes every ``WATCH_HEARTBEAT`` seconds as the watcher does). Each viewer is
a browser tab as static/js/liqo-dash.js drives it: one live region (namespace list, matrix or cluster
list every 2 s; overview, a cluster's page or the audit trail every 5 s; a namespace's status every
2 s, until it answers 286 as htmx does), polled with ``X-Live-Poll`` and the ETag it got, plus the
freshness badge every 10 s. The load
generator is asyncio on loopback, one connection per request (gunicorn closes idle keep-alive
connections after 2 s), bounded in viewers and time.

    python -m bench.viewers [--fleet 1000x20] [--viewers 50 --viewers 200] [--window 20]

Figures per viewer count: p50/p95/max of the idle polls (every answer in the window), how many were
304, and the web pod's CPU (utime + stime of gunicorn's master and workers, /proc/<pid>/stat) over the
window: cores used, and microseconds of CPU per second per viewer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import harness

GOAL_P95_MS = 200.0
GOAL_VIEWERS = 500
FRESHNESS_EVERY_S = 10.0


@dataclass
class ViewersRun:
    viewers: int
    window_s: float
    polls: int
    not_modified: int  # answered 304
    errors: int  # no answer, or an answer other than 200 / 286 / 304
    p50_ms: float
    p95_ms: float
    max_ms: float
    web_cores: float  # CPU seconds of the web pod per second of the window
    cpu_us_per_viewer_s: float  # microseconds of web CPU per second, per viewer
    generator_cores: float = 0.0  # the load generator's own CPU (this process), sharing the machine
    per_region_p95_ms: dict[str, float] = field(default_factory=dict)
    per_region_rendered: dict[str, int] = field(default_factory=dict)  # polls answered 200 / 286 (rendered)

    def line(self) -> str:
        share = 100 * self.not_modified / self.polls if self.polls else 0.0
        return (
            f"{self.viewers:4d} viewers: {self.polls} polls in {self.window_s:.0f} s ({share:.0f} % 304, "
            f"{self.errors} errors), p50 {self.p50_ms:.1f} ms, p95 {self.p95_ms:.1f} ms, max {self.max_ms:.0f} ms; "
            f"web {self.web_cores:.2f} cores = {self.cpu_us_per_viewer_s:.0f} us CPU per viewer per second "
            f"(load generator {self.generator_cores:.2f} cores)"
        )


# --------------------------------------------------------------------------------------------------
# The web pod


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WebPod:
    """The Procfile's web process on the benchmark's database (its own process group)."""

    def __init__(self, var_dir: Path, **extra_env: str) -> None:
        from django.db import connection

        self.port = _free_port()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
            "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
            "LIQO_DASH_LOCAL_CACHE": "true",  # no Redis: nothing is queued, the pages only read
            "INSECURE_HTTP": "true",
            "LOG_LEVEL": "WARNING",
            **extra_env,
        }
        self.log = var_dir / "web.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "liqo_dash.wsgi",
                    "-c",
                    "deploy/gunicorn.conf.py",
                    "--bind",
                    f"127.0.0.1:{self.port}",
                    "--workers",
                    "2",
                    "--threads",
                    "4",
                    "--access-logfile",
                    "-",
                ],
                cwd=harness.ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while self.log.read_text(errors="replace").count("Booting worker") < 2:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"gunicorn did not start:\n{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

    def pids(self) -> list[int]:
        """gunicorn's master and its workers (the master's children)."""
        found = [self.proc.pid]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == self.proc.pid:
                    found.append(int(entry.name))
        return found

    def cpu_s(self) -> float:
        """utime + stime of the master and workers, in seconds."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        return total / ticks

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# --------------------------------------------------------------------------------------------------
# The viewers


def _regions() -> list[tuple[str, str, float]]:
    """(name, URL, poll interval in s) of the live regions the viewers keep open."""
    from offloading.models import Cluster, Namespace

    cluster = Cluster.objects.order_by("cluster_id").values_list("cluster_id", flat=True).first() or "none"
    offloaded = Namespace.objects.filter(offloaded=True).order_by("name").values_list("name", flat=True).first()
    return [
        ("namespace list", "/namespaces/", 2.0),
        ("namespace list, filtered", "/namespaces/?phase=Ready&page=2", 2.0),
        ("overview", "/", 5.0),
        ("matrix", "/matrix/", 2.0),
        ("cluster list", "/clusters/", 2.0),
        ("cluster page", f"/clusters/{cluster}/", 5.0),
        ("namespace status", f"/namespaces/{offloaded or 'default'}/status/", 2.0),
        ("audit", "/audit/", 5.0),
    ]


def _sessions(count: int) -> list[str]:
    """``count`` session cookies of signed-in users (an admin and viewers, round robin)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    users = get_user_model().objects
    people = []
    for i in range(5):
        user, _ = users.get_or_create(username=f"bench-viewer-{i}")
        if i == 0:
            user.is_superuser, user.is_staff = True, True
            user.save()
        else:
            user.groups.add(Group.objects.get_or_create(name="viewer")[0])  # gone after a flush
        people.append(user)
    cookies = []
    for i in range(count):
        client = Client()
        client.force_login(people[i % len(people)])
        cookies.append(client.cookies["sessionid"].value)
    return cookies


async def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], float]:
    """One GET on a new connection: (status, headers, seconds until the whole answer was read)."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *rest = head.decode("latin-1").split("\r\n")
        answer = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in rest if line)}
        length = int(answer.get("content-length") or 0)
        if length:
            await reader.readexactly(length)
        elif "chunked" in answer.get("transfer-encoding", "") or int(status_line.split()[1]) not in (204, 304):
            await reader.read()  # until the server closes
        return int(status_line.split()[1]), answer, time.perf_counter() - started
    finally:
        writer.close()


async def _viewers(
    port: int,
    cookies: list[str],
    regions: list[tuple[str, str, float]],
    window_s: float,
    log: Callable[[str], None],
    window_started: Callable[[], None],
) -> tuple[list[tuple[str, int, float]], int]:
    """Every viewer opens its region once (rendered, a few at a time), then polls it with its ETag (and
    the badge) for ``window_s``. Returns the polls of the window (region, status, seconds) and errors."""
    viewers = []
    for i, cookie in enumerate(cookies):
        name, url, every = regions[i % len(regions)]
        viewers.append({"name": name, "url": url, "every": every, "cookie": cookie, "etag": "", "badge": ""})
    opening = asyncio.Semaphore(8)
    errors = 0

    def headers(viewer: dict[str, Any], etag: str) -> dict[str, str]:
        sent = {"Cookie": f"sessionid={viewer['cookie']}", "X-Live-Poll": "1", "HX-Request": "true"}
        if etag:
            sent["If-None-Match"] = etag
        return sent

    async def open_page(viewer: dict[str, Any]) -> None:
        nonlocal errors
        async with opening:
            for key, url in (("etag", viewer["url"]), ("badge", "/live/freshness/")):
                try:
                    status, answer, _ = await _get(port, url, headers(viewer, ""))
                except (OSError, asyncio.IncompleteReadError):
                    errors += 1
                    continue
                if status not in (200, 286):
                    raise RuntimeError(f"{url} answered {status} to a signed-in viewer")
                viewer[key] = answer.get("etag", "")
                viewer["stopped_" + key] = status == 286  # settled: htmx stops polling this region

    started = time.perf_counter()
    await asyncio.gather(*(open_page(v) for v in viewers))
    log(f"{len(viewers)} viewers opened their pages in {time.perf_counter() - started:.1f} s")
    polls: list[tuple[str, int, float]] = []
    window_started()
    deadline = time.monotonic() + window_s

    async def poll(viewer: dict[str, Any], key: str, url: str, every: float, name: str) -> None:
        nonlocal errors
        await asyncio.sleep(random.uniform(0, min(every, window_s)))  # tabs opened at different moments
        while time.monotonic() < deadline and not viewer.get("stopped_" + key):
            tick = time.monotonic()
            try:
                status, answer, seconds = await asyncio.wait_for(_get(port, url, headers(viewer, viewer[key])), 30)
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                errors += 1
            else:
                if status not in (200, 286, 304):
                    errors += 1
                polls.append((name, status, seconds))
                viewer[key] = answer.get("etag") or viewer[key]
                viewer["stopped_" + key] = status == 286
            await asyncio.sleep(max(0.0, min(every - (time.monotonic() - tick), deadline - time.monotonic())))

    tasks = []
    for v in viewers:
        tasks.append(poll(v, "etag", v["url"], v["every"], v["name"]))
        tasks.append(poll(v, "badge", "/live/freshness/", FRESHNESS_EVERY_S, "freshness badge"))
    await asyncio.gather(*tasks)
    return polls, errors


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _heartbeat(stop: threading.Event) -> None:
    """What the watcher does while nothing changes: mark the snapshot fresh every few seconds."""
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from offloading.models import SnapshotState

    every = float(settings.LIQO_DASH["WATCH_HEARTBEAT"])
    try:
        while not stop.wait(every):
            now = timezone.now()
            SnapshotState.objects.filter(pk=1).update(last_success_at=now, last_attempt_at=now)
    finally:
        connection.close()


def run(pod: WebPod, cookies: list[str], window_s: float, log: Callable[[str], None]) -> ViewersRun:
    """``cookies`` viewers for ``window_s`` seconds; the web pod's CPU over the polling window only
    (from when every viewer has opened its page: what idle open pages cost)."""
    marks: list[tuple[float, float]] = []
    stop = threading.Event()
    beating = threading.Thread(target=_heartbeat, args=(stop,), daemon=True)

    def mark() -> None:
        marks.append((pod.cpu_s(), time.monotonic()))
        used = resource.getrusage(resource.RUSAGE_SELF)
        generator.append(used.ru_utime + used.ru_stime)

    generator: list[float] = []

    beating.start()
    try:
        polls, errors = asyncio.run(_viewers(pod.port, cookies, _regions(), window_s, log, mark))
    finally:
        stop.set()
        beating.join(10)
    mark()
    (cpu_before, wall_before), (cpu_after, wall_after) = marks[0], marks[-1]
    cores = (cpu_after - cpu_before) / max(1e-9, wall_after - wall_before)
    times = [s * 1000 for _, _, s in polls]
    by_region: dict[str, list[float]] = {}
    for name, _, seconds in polls:
        by_region.setdefault(name, []).append(seconds * 1000)
    return ViewersRun(
        viewers=len(cookies),
        window_s=round(wall_after - wall_before, 1),
        polls=len(polls),
        not_modified=sum(1 for _, status, _ in polls if status == 304),
        errors=errors,
        p50_ms=round(statistics.median(times), 1) if times else 0.0,
        p95_ms=round(_percentile(times, 0.95), 1),
        max_ms=round(max(times, default=0.0), 1),
        web_cores=round(cores, 3),
        cpu_us_per_viewer_s=round(cores * 1e6 / max(1, len(cookies)), 1),
        generator_cores=round((generator[-1] - generator[0]) / max(1e-9, wall_after - wall_before), 3),
        per_region_p95_ms={name: round(_percentile(values, 0.95), 1) for name, values in sorted(by_region.items())},
        per_region_rendered={
            name: sum(1 for n, status, _ in polls if n == name and status in (200, 286)) for name in sorted(by_region)
        },
    )


def measure(
    namespaces: int,
    clusters: int,
    var_dir: Path,
    counts: list[int],
    window_s: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The fleet into the snapshot (cold refresh), then the web pod and each count of viewers."""
    from offloading.snapshot.refresh import refresh

    with harness.Fleet(namespaces, clusters, var_dir) as fleet:
        report = refresh()
        if not report.ok:
            raise RuntimeError(f"refresh failed: {report.error}")
        log(f"viewers: snapshot of {fleet.label} taken")
    cookies = _sessions(max(counts))
    runs, persistent = [], []
    # The Procfile's web process as it is (a database connection per request: DATABASE_CONN_MAX_AGE 0),
    # then the most viewers again with persistent connections (DATABASE_CONN_MAX_AGE=60).
    for extra, counted, found in (({}, counts, runs), ({"DATABASE_CONN_MAX_AGE": "60"}, counts[-1:], persistent)):
        pod = WebPod(var_dir, **extra)
        try:
            for count in counted:
                item = run(pod, cookies[:count], window_s, log)
                log(item.line() + (" (DATABASE_CONN_MAX_AGE=60)" if extra else ""))
                found.append(item)
        finally:
            pod.stop()
    return {
        "fleet": f"{namespaces}x{clusters}",
        "runs": [asdict(r) for r in runs],
        "persistent_connections": [asdict(r) for r in persistent],
        "viewers_p95_ms": {str(r.viewers): r.p95_ms for r in runs},
        "idle_viewer_cpu_us_per_s": {str(r.viewers): r.cpu_us_per_viewer_s for r in runs},
    }


def lines(figures: dict[str, Any]) -> list[str]:
    out = [f"Open pages at rest, one web pod (gunicorn 2 workers x 4 threads), fleet {figures.get('fleet')}:"]
    for key, note in (("runs", ""), ("persistent_connections", " (DATABASE_CONN_MAX_AGE=60)")):
        for item in figures.get(key) or []:
            run_ = ViewersRun(**item)
            goal = ""
            if run_.viewers >= GOAL_VIEWERS:
                goal = f"  [{'meets' if run_.p95_ms <= GOAL_P95_MS else 'MISSES'} p95 <= {GOAL_P95_MS:.0f} ms]"
            out.append("  " + run_.line() + note + goal)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.viewers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", default="1000x20", help="NAMESPACESxCLUSTERS (default 1000x20)")
    parser.add_argument("--viewers", type=int, action="append", help="viewer counts (repeatable); default 50, 200")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of polling per count (default 20)")
    args = parser.parse_args(argv)
    namespaces, clusters = (int(part) for part in args.fleet.lower().split("x"))
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="liqo-dash-bench-viewers-") as tmp:
        harness.setup_django(Path(tmp))
        figures = measure(namespaces, clusters, Path(tmp), args.viewers or [50, 200], args.window, log)
    print("\n".join(lines(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
