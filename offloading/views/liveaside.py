"""Renders aside: a live region's render made in a process beside the web process (issue 30).

While a bulk applies, every region's counters move and the polls that hold a region's lease render it
again (once per region and access a second at most, docs/live-pages.md). At 10,000 namespaces a render
costs 15-150 ms of CPU, and made in a poll's thread it holds the web process's GIL that long: every
other poll of that process waits for it, at each read it makes (measured in session 13: the p95 of
every region during a bulk was a render's). A render thread in the same process did no better (it took
the same GIL). So the render is made in another process, started by each web process when it first
needs one (``manage.py live_renderer``, its own interpreter and GIL), and the web process's polls only
read counters and answer 304s or kept renders.

How a render goes aside:

* The poll that holds the region's lease (the one render per region and access at a time) and already
  holds an older render sends the renderer the poll's own request: its WSGI environ (method, path,
  query, headers, cookies: the renderer is this web process's child, on a pipe only the two share), with
  the counters' version and read time and the shared key under :data:`ASIDE`, an environ key no HTTP
  header can produce (a header becomes ``HTTP_...``).
* The renderer runs it through the whole middleware chain, as the web process would: the session,
  the user, the role and the scopes are checked there again, and a refusal or a redirect comes back as
  it is. ``offloading.views.live`` sees :data:`ASIDE` and renders at once (no 304, no lease: the poll
  holds it) and keeps the render in the shared cache; the web process releases the lease when the
  answer comes (or the renderer died).
* The poll waits ``LIVE_RENDER_WAIT_MS`` (150) for the answer; past that it answers 304 (the viewer
  keeps what it holds) and the render, when it comes, is kept in this process's copy and the shared
  cache for the next polls of every viewer of that access. A poll that holds nothing renders itself.
* The renderer not started yet (it warms up first), dead or overloaded: the poll renders itself,
  as before. A renderer that exits is started again :data:`RESTART_S` seconds after it was last started
  (doubling up to :data:`RESTART_MAX_S` while it dies before it is ready).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest, get_script_name
from django.http import HttpRequest, HttpResponse
from django.urls import set_script_prefix

log = logging.getLogger(__name__)

ASIDE = "liqo_dash.live_render"  # the environ key of a render made aside: {"version", "read_ms", "key"}
RESTART_S = 5.0  # a renderer that died is started again this long after (doubling while it dies unready)
RESTART_MAX_S = 60.0
MAX_PENDING = 16  # renders waiting for the renderer beyond which a poll renders itself (their jobs, ~2 KB
# each, stay within the pipe's 64 KB: sending one never waits for the renderer)
_READY = "ready"

# What of the poll's environ the renderer needs to run it as the web process would (besides the headers).
_COPIED = (
    "REQUEST_METHOD",
    "PATH_INFO",
    "SCRIPT_NAME",
    "QUERY_STRING",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "REMOTE_ADDR",
    "wsgi.url_scheme",
)


def job_of(request: HttpRequest, version: str, read_ms: int, key: str) -> dict[str, Any]:
    """What the renderer is sent for ``request``: its environ (headers included), and under ``aside``
    the counters' version, when they were read and the shared key."""
    meta = request.META
    environ = {name: str(meta[name]) for name in _COPIED if name in meta}
    environ.update({name: str(value) for name, value in meta.items() if name.startswith("HTTP_")})
    return {"environ": environ, "aside": {"version": version, "read_ms": read_ms, "key": key}}


class Renderer:
    """The render process beside one web process: started when first asked, fed jobs as JSON lines on
    its stdin, answering them in order on its stdout (one reader thread here resolves their futures)."""

    def __init__(self, command: list[str] | None = None) -> None:
        self._command = command
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._pid = 0  # the web process this renderer belongs to (a fork must start its own)
        self._pending: dict[int, Future[dict[str, Any] | None]] = {}  # by job number
        self._sent = 0
        self._next_start = 0.0
        self._backoff = RESTART_S

    def command(self) -> list[str]:
        return self._command or [sys.executable, "-m", "django", "live_renderer"]

    def submit(self, job: dict[str, Any]) -> Future[dict[str, Any] | None] | None:
        """Send ``job``; its answer comes on the future (None: the renderer died first). None: not sent
        (starting, dead, or too many waiting): the caller renders itself."""
        with self._lock:
            proc = self._running()
            if proc is None or not self._ready or len(self._pending) >= MAX_PENDING or proc.stdin is None:
                return None
            future: Future[dict[str, Any] | None] = Future()
            self._sent += 1
            try:
                proc.stdin.write(json.dumps({**job, "id": self._sent}).encode() + b"\n")
                proc.stdin.flush()
            except OSError:
                log.warning("live renderer: could not send a render (it died); this poll renders itself")
                return None
            self._pending[self._sent] = future
            return future

    def start(self) -> None:
        """Start the renderer unless it runs (or was started less than RESTART_S ago): called by every
        live page and poll that reaches a view, so that it is warm before the first render it is asked."""
        if self._proc is not None and self._pid == os.getpid() and self._proc.poll() is None:
            return  # the usual case, without the lock
        with self._lock:
            self._running()

    def pid(self) -> int | None:
        with self._lock:
            return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def stop(self) -> None:
        with self._lock:
            proc, self._proc, self._ready = self._proc, None, False
        if proc is not None:
            _close(proc.stdin)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)

    def _running(self) -> subprocess.Popen[bytes] | None:
        """The live renderer of this process, started when there is none (under the lock)."""
        if self._proc is not None and self._pid == os.getpid() and self._proc.poll() is None:
            return self._proc
        if self._pid != os.getpid():
            self._proc, self._pending = None, {}  # a forked copy: the parent's renderer is not ours
        if time.monotonic() < self._next_start:
            return None
        self._next_start = time.monotonic() + self._backoff
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # it answers no /metrics and counts no request
        root = str(Path(settings.BASE_DIR))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
        try:
            proc = subprocess.Popen(
                self.command(), cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True
            )
        except OSError:
            log.exception("live renderer: could not start %s; polls render themselves", self.command())
            return None
        self._proc, self._pid, self._ready = proc, os.getpid(), False
        threading.Thread(target=self._read, args=(proc,), name="live-renderer-reader", daemon=True).start()
        log.info("live renderer started (pid %s)", proc.pid)
        return None  # not ready before it says so

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        """Resolve the futures in order as the answers come; at the end, fail what is left."""
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue  # not one of our lines
            with self._lock:
                if answer == _READY:
                    self._ready = self._proc is proc
                    self._backoff = RESTART_S
                    continue
                number = answer.get("id") if isinstance(answer, dict) else None
                found = self._pending.pop(number, None) if isinstance(number, int) else None
            if found is not None:
                found.set_result(answer)
        proc.wait()
        with self._lock:
            if self._proc is not proc:
                return
            left, self._pending, ready, self._ready = list(self._pending.values()), {}, self._ready, False
            if not ready:  # it died before it was ever ready: wait longer before the next try
                self._backoff = min(RESTART_MAX_S, self._backoff * 2)
            delay = max(0.0, self._next_start - time.monotonic())
        log.warning("live renderer (pid %s) exited with %s; %d renders lost", proc.pid, proc.returncode, len(left))
        restart = threading.Timer(delay, self.start)  # started again even if no poll reaches a view meanwhile
        restart.daemon = True
        restart.start()
        for future in left:
            future.set_result(None)  # the web process releases the lease


def _close(stream: IO[bytes] | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()


def response_of(answer: dict[str, Any]) -> HttpResponse:
    """The renderer's answer as the web process's response."""
    response = HttpResponse(answer["content"].encode("latin-1"), status=int(answer["status"]))
    for name, value in answer["headers"]:
        if name.lower() == "set-cookie":
            continue
        response[name] = value
    for cookie in answer.get("cookies", []):
        response.cookies.load(cookie)
    return response


# --------------------------------------------------------------------------------------------------
# The renderer's side (manage.py live_renderer)


def serve(stdin: IO[bytes], stdout: IO[bytes], warm: Callable[[], object] | None = None) -> None:
    """Answer every job read from ``stdin`` on ``stdout``, in order, until ``stdin`` ends (the web
    process is gone)."""
    handler = WSGIHandler()
    if warm is not None:
        warm()
    with contextlib.suppress(BrokenPipeError):  # the web process went away: nothing left to answer
        _answer(stdout, _READY)
        for line in stdin:
            _answer(stdout, _job(handler, line))


def _answer(stdout: IO[bytes], answer: object) -> None:
    stdout.write(json.dumps(answer).encode() + b"\n")
    stdout.flush()


def _job(handler: WSGIHandler, line: bytes) -> dict[str, Any]:
    job: dict[str, Any] = {}
    try:
        job = json.loads(line)
        answer = run(handler, job)
    except Exception:  # noqa: BLE001 - one broken job must not end the renderer: the poll gets a 500
        log.exception("live renderer: a render failed")
        answer = {"status": 500, "headers": [["Content-Type", "text/plain"]], "content": "render failed"}
    return {**answer, "id": job.get("id")}


def run(handler: WSGIHandler, job: dict[str, Any]) -> dict[str, Any]:
    """One job through the whole middleware chain, as ``WSGIHandler.__call__`` runs a request."""
    environ: dict[str, Any] = dict(job["environ"])
    environ.update(
        {"wsgi.input": io.BytesIO(b""), "wsgi.errors": sys.stderr, "CONTENT_LENGTH": "0", ASIDE: job["aside"]}
    )
    set_script_prefix(get_script_name(environ))
    signals.request_started.send(sender=WSGIHandler, environ=environ)
    request = WSGIRequest(environ)
    response = handler.get_response(request)
    try:
        shared = getattr(response, "live_shared", None)
        return {
            "status": response.status_code,
            "headers": [[name, value] for name, value in response.items()],
            "cookies": [cookie.output(header="").strip() for cookie in response.cookies.values()],
            "content": b"".join(response).decode("latin-1"),
            "reuse_ms": None if shared is None else shared.reuse_ms,
        }
    finally:
        response.close()  # request_finished: the connections closed or kept as after any request
