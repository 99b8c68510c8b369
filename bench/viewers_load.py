"""The viewers of bench/viewers.py: browser tabs as static/js/liqo-dash.js drives them, each polling one
live region with its ETag (and the freshness badge), asyncio on loopback, through windows one after the
other; the figures of each window (:class:`ViewersRun`), the web pod's CPU over it included."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.viewers_pod import BulkRun, KeptConnection, WebPod, get, regions

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
    per_region_rendered: dict[str, int] = field(default_factory=dict)  # polls answered 200 / 286, rendered for it
    per_region_shared: dict[str, int] = field(default_factory=dict)  # of those, another viewer's render (X-Live)
    per_region_bytes: dict[str, int] = field(default_factory=dict)  # mean body of those answers
    phase: str = "idle"  # or "bulk": while a bulk offload applies
    web_args: str | None = None  # GUNICORN_CMD_ARGS of a compared web process (None: the main runs')
    load_average: float = 0.0  # the machine's (1 min), at the window's end
    web_cpu_s: float = 0.0  # the web pod's CPU seconds over the window
    web_rss_mb: float = 0.0  # its resident memory (master, workers, live renderers) at the window's end, MiB
    bulk: dict[str, Any] | None = None  # the bulk of the window (viewers_pod.BulkRun)
    posting_p95_ms: float = 0.0  # p95 of the polls started while the bulk's POST was in flight
    applying_p95_ms: float = 0.0  # and after it answered (the worker and the watcher writing)

    def line(self) -> str:
        share = 100 * self.not_modified / self.polls if self.polls else 0.0
        args = "" if self.web_args is None else f" [GUNICORN_CMD_ARGS={self.web_args!r}]"
        return (
            f"{self.viewers:4d} viewers, {self.phase:<4}{args}: {self.polls} polls in {self.window_s:.0f} s ({share:.0f} % "
            f"304, {self.errors} errors), p50 {self.p50_ms:.1f} ms, p95 {self.p95_ms:.1f} ms, max "
            f"{self.max_ms:.0f} ms; web {self.web_cores:.2f} cores = {self.cpu_us_per_viewer_s:.0f} us CPU per "
            f"viewer per second (load generator {self.generator_cores:.2f} cores; load average {self.load_average:.1f})"
        )


Poll = tuple[int, str, int, float, float, str, int]  # window, region, status, seconds, started, X-Live, bytes


async def _viewers(
    port: int,
    cookies: list[str],
    pages: list[tuple[str, str, float]],
    windows: list[Callable[[], Any]],
    log: Callable[[str], None],
    mark: Callable[[], None],
    keep_alive: bool = True,
) -> tuple[list[Poll], int, list[Any]]:
    """Every viewer opens its region once (rendered, a few at a time), then polls it with its ETag (and
    the badge) through ``windows`` one after the other (each a function, run in a thread: a window lasts
    as long as it runs; ``mark`` at every boundary). Returns the polls (by the window they started in),
    the errors and what each window returned."""
    viewers: list[dict[str, Any]] = []
    for i, cookie in enumerate(cookies):
        name, url, every = pages[i % len(pages)]
        viewers.append({"name": name, "url": url, "every": every, "cookie": cookie, "etag": "", "badge": ""})
    kept: list[KeptConnection] = []

    def sender(viewer: dict[str, Any], key: str) -> Callable[..., Any]:
        """How this viewer's poller sends: on its own kept-alive connection, or a new one each time."""
        if not keep_alive:
            return functools.partial(get, port)
        if "conn_" + key not in viewer:
            viewer["conn_" + key] = KeptConnection(port)
            kept.append(viewer["conn_" + key])
        return viewer["conn_" + key].get

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
                    status, answer, _ = await sender(viewer, key)(url, headers(viewer, ""))
                except (OSError, asyncio.IncompleteReadError):
                    errors += 1
                    continue
                if status not in (200, 286):
                    raise RuntimeError(f"{url} answered {status} to a signed-in viewer")
                viewer[key] = answer.get("etag", "")
                viewer["stopped_" + key] = status == 286  # settled: htmx stops polling this region

    started = time.perf_counter()
    await asyncio.gather(*(open_page(v) for v in viewers))
    if viewers:
        log(f"{len(viewers)} viewers opened their pages in {time.perf_counter() - started:.1f} s")
    polls: list[Poll] = []
    stop = asyncio.Event()
    current = 0

    async def pause(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, seconds))

    async def poll(viewer: dict[str, Any], key: str, url: str, every: float, name: str) -> None:
        nonlocal errors
        await pause(random.uniform(0, every))  # tabs opened at different moments
        while not stop.is_set() and not viewer.get("stopped_" + key):
            tick, window = time.monotonic(), current
            try:
                status, answer, seconds = await asyncio.wait_for(
                    sender(viewer, key)(url, headers(viewer, viewer[key])), 30
                )
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                errors += 1
                if keep_alive:
                    viewer["conn_" + key].close()  # a request cut in the middle: the next one opens anew
            else:
                if status not in (200, 286, 304):
                    errors += 1
                size = int(answer.get("content-length") or 0)
                polls.append((window, name, status, seconds, tick, answer.get("x-live", ""), size))
                viewer[key] = answer.get("etag") or viewer[key]
                viewer["stopped_" + key] = status == 286
            await pause(every - (time.monotonic() - tick))

    async def drive() -> list[Any]:
        nonlocal current
        results = []
        for index, window in enumerate(windows):
            current = index
            mark()
            results.append(await asyncio.to_thread(window))
        mark()
        stop.set()
        return results

    tasks = []
    for v in viewers:
        tasks.append(poll(v, "etag", v["url"], v["every"], v["name"]))
        tasks.append(poll(v, "badge", "/live/freshness/", FRESHNESS_EVERY_S, "freshness badge"))
    results, *_ = await asyncio.gather(drive(), *tasks)
    if kept:
        reopened = sum(c.opened for c in kept) - len(kept)
        log(f"{len(kept)} kept-alive connections, opened again {reopened} times (the server closed them)")
    for connection in kept:
        connection.close()
    return polls, errors, results


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(
    pod: WebPod,
    cookies: list[str],
    windows: list[tuple[str, Callable[[], Any]]],
    log: Callable[[str], None],
    keep_alive: bool = True,
) -> list[ViewersRun]:
    """``cookies`` viewers through ``windows`` ((phase, function): the window lasts as long as the
    function runs; a bulk window's function returns its BulkRun). The web pod's CPU over each window
    only (from when every viewer has opened its page)."""
    marks: list[tuple[float, float, float, float]] = []  # web CPU, wall, this process's CPU, load average
    memory: list[float] = []  # the web pod's resident memory at each mark (MiB)

    def mark() -> None:
        used = resource.getrusage(resource.RUSAGE_SELF)
        marks.append((pod.cpu_s(), time.monotonic(), used.ru_utime + used.ru_stime, os.getloadavg()[0]))
        memory.append(pod.rss_mb())

    polls, errors, results = asyncio.run(
        _viewers(pod.port, cookies, regions(), [w for _, w in windows], log, mark, keep_alive)
    )
    found = []
    for index, (phase, _) in enumerate(windows):
        (cpu_before, wall_before, own_before, _), (cpu_after, wall_after, own_after, load) = marks[index : index + 2]
        wall = max(1e-9, wall_after - wall_before)
        cores = (cpu_after - cpu_before) / wall
        mine = [
            (name, status, s * 1000, t - wall_before, x)
            for window, name, status, s, t, x, _ in polls
            if window == index
        ]
        sizes: dict[str, list[int]] = {}
        for window, name, status, *_, size in polls:
            if window == index and status in (200, 286):
                sizes.setdefault(name, []).append(size)
        posting = results[index].request_s if isinstance(results[index], BulkRun) else 0.0
        times = [ms for _, _, ms, _, _ in mine]
        by_region: dict[str, list[float]] = {}
        for name, _, ms, _, _ in mine:
            by_region.setdefault(name, []).append(ms)
        found.append(
            ViewersRun(
                viewers=len(cookies),
                window_s=round(wall, 1),
                polls=len(mine),
                not_modified=sum(1 for _, status, *_ in mine if status == 304),
                errors=errors if index == len(windows) - 1 else 0,  # counted over the whole session
                p50_ms=round(statistics.median(times), 1) if times else 0.0,
                p95_ms=round(_percentile(times, 0.95), 1),
                max_ms=round(max(times, default=0.0), 1),
                web_cores=round(cores, 3),
                cpu_us_per_viewer_s=round(cores * 1e6 / max(1, len(cookies)), 1),
                generator_cores=round((own_after - own_before) / wall, 3),
                per_region_p95_ms={name: round(_percentile(v, 0.95), 1) for name, v in sorted(by_region.items())},
                per_region_rendered={
                    name: sum(1 for n, status, _, _, x in mine if n == name and status in (200, 286) and x != "shared")
                    for name in sorted(by_region)
                },
                per_region_bytes={name: round(statistics.mean(found)) for name, found in sizes.items()},
                per_region_shared={
                    name: sum(1 for n, *_, x in mine if n == name and x == "shared") for name in by_region
                },
                phase=phase,
                load_average=round(load, 2),
                web_cpu_s=round(cpu_after - cpu_before, 2),
                web_rss_mb=round(max(memory[index : index + 2]), 1),
                bulk=asdict(results[index]) if isinstance(results[index], BulkRun) else None,
                posting_p95_ms=round(_percentile([ms for _, _, ms, t, _ in mine if t < posting], 0.95), 1),
                applying_p95_ms=round(_percentile([ms for _, _, ms, t, _ in mine if t >= posting], 0.95), 1),
            )
        )
    return found
