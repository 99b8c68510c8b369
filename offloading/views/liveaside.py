"""Live regions rendered aside (offloading.views.live): a render costs tens to hundreds of milliseconds
of CPU at 10,000 namespaces, several times that in wall time while a bulk applies on the same cores, and
a poll that rendered waited that long (during a bulk, those polls were the slowest twentieth). So a poll
from a viewer who already holds a render of the region starts the new render in this process's render
thread and waits for it at most LIVE_RENDER_WAIT_MS; then it keeps what it has (a 304), and the render,
still running, is kept for the following polls of every viewer of that access (its lease is held until
it ends, so a region is rendered once whatever the number of polls meanwhile). A viewer alone sees the
change at its next poll when the render took longer than the wait. One thread: renders of different
regions queue behind each other instead of taking the GIL from each other and from the polls. A render
runs on its poll's request object; its database connection is the thread's own, closed when too old as a
request's is."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from django.db import close_old_connections
from django.http import HttpResponse

log = logging.getLogger("offloading.views.live")

render_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-render")


def aside(render: Callable[[], HttpResponse], wait_s: float, meanwhile: Callable[[], HttpResponse]) -> HttpResponse:
    """``render()`` in the render thread: its answer if it ends within ``wait_s``, else ``meanwhile()``
    (the render goes on, and a failure is logged)."""
    future = render_thread.submit(_in_render_thread, render)
    try:
        return future.result(timeout=wait_s)
    except FutureTimeout:
        future.add_done_callback(_log_failure)
        return meanwhile()


def _in_render_thread(render: Callable[[], HttpResponse]) -> HttpResponse:
    close_old_connections()
    try:
        return render()
    finally:
        close_old_connections()


def _log_failure(future: Future[HttpResponse]) -> None:
    error = future.exception()
    if error is not None:
        log.error("live: a region rendered aside failed", exc_info=error)
