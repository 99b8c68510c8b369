"""Renders aside (offloading/views/liveaside.py): a poll that must render its region again, and holds an
older render of it, has the web process's render process make it and waits LIVE_RENDER_WAIT_MS for it.

The end-to-end test runs the Procfile's web process (gunicorn, the default settings from the
environment) on committed rows; the unit tests drive the poll's side with a stand-in for the renderer
process (its futures), in process, where the rows are in the test's transaction."""

from __future__ import annotations

import http.client
import os
import signal
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core import signals
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections, connection
from django.test import Client

from offloading.models import Namespace
from offloading.views import live, liveaside, livetags
from tests import webproc
from tests.fixtures.waits import wait_until

POLL = {"X-Live-Poll": "1", "HX-Request": "true"}
OVERVIEW = "/"


def _viewer(django_user_model: Any, name: str) -> Client:
    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])  # a flush (transactional_db) drops it
    client = Client()
    client.force_login(user)
    return client


def _renderers(web_pid: int) -> dict[int, int]:
    """The live renderers under gunicorn ``web_pid``: renderer pid -> its worker's pid."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                commands[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue
    workers = {pid for pid, parent in parents.items() if parent == web_pid}
    return {pid: parent for pid, parent in parents.items() if parent in workers and b"live_renderer" in commands[pid]}


class _Poller:
    """One viewer's kept-alive connection (so its polls stay with one gunicorn worker), with its ETag."""

    def __init__(self, port: int, cookie: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookie, self.etag = cookie, ""

    def get(self, path: str = OVERVIEW, poll: bool = True) -> tuple[int, dict[str, str], str]:
        headers = {"Cookie": self.cookie, **(POLL if poll else {})}
        if poll and self.etag:
            headers["If-None-Match"] = self.etag
        self.connection.request("GET", path, headers=headers)
        response = self.connection.getresponse()
        body = response.read().decode()
        found = {k.lower(): v for k, v in response.getheaders()}
        self.etag = found.get("etag", self.etag)
        return response.status, found, body

    def until_changed(self, timeout: float = 20.0) -> tuple[dict[str, str], str]:
        """Poll every 0.3 s until the region comes back (200): its headers and body."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, headers, body = self.get()
            if status == 200:
                return headers, body
            assert status == 304, (status, body[:300])
            time.sleep(0.3)
        raise AssertionError("the region never came back")

    def aside_after(self, phase: str, timeout: float = 60.0) -> tuple[dict[str, str], str]:
        """Move the region (the shop namespace's phase, alternating with ``phase``-Pending) until a poll's
        answer was rendered aside; the last move is to ``phase``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for value in (f"{phase}Pending", phase):
                Namespace.objects.filter(name="shop").update(offloading_phase=value)
                time.sleep(livetags.HOLD_S)
                headers, body = self.until_changed()
            if headers.get("x-live-aside") == "1":
                return headers, body
        raise AssertionError("no render came from the renderer")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_web_process_renders_a_moved_region_in_its_renderer(
    fleet: Any, django_user_model: Any, tmp_path: Path
) -> None:
    client = _viewer(django_user_model, "vera")
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    proc, port, log = webproc.web(tmp_path, "web", GUNICORN_CMD_ARGS="--workers 1")
    try:
        wait_until(lambda: proc.poll() is not None or webproc.answers(port), 90, message="gunicorn")
        assert proc.poll() is None, log.read_text()
        viewer = _Poller(port, cookie)
        assert viewer.get(poll=False)[0] == 200  # the page: the worker starts its renderer
        wait_until(lambda: _renderers(proc.pid), 60, message="the live renderer")
        status, headers, _ = viewer.get()
        assert status == 200 and "x-live-aside" not in headers  # holding nothing, the poll renders itself
        first = set(_renderers(proc.pid))

        # The region moves: once the renderer is warm, the next poll after HOLD_S is rendered there.
        headers, body = viewer.aside_after("SomeFailed")
        assert headers.get("x-live") == "rendered", headers
        assert "SomeFailed" in body or "Some failed" in body, body[:500]
        assert headers.get("cache-control") == "no-store" and "Cookie" in headers.get("vary", "")

        # The renderer killed: polls still get the region (rendered in the poll meanwhile), and the
        # worker starts a renderer again, which renders the next change.
        os.kill(next(iter(first)), signal.SIGKILL)
        Namespace.objects.filter(name="shop").update(offloading_phase="AllFailed")
        time.sleep(livetags.HOLD_S)
        headers, body = viewer.until_changed()
        assert "AllFailed" in body or "All failed" in body, body[:500]
        wait_until(lambda: set(_renderers(proc.pid)) - first, 60, message="a new live renderer")
        headers, body = viewer.aside_after("Ready")
        assert ">Ready<" in body or "Ready" in body
    finally:
        webproc.stop(proc)
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]
    wait_until(lambda: not _renderers(proc.pid), 10, message="the renderers to end with their worker")


# --------------------------------------------------------------------------------------------------
# The poll's side, with a stand-in for the renderer


class _Stand:
    """Takes the jobs as the Renderer would, and answers them when the test says."""

    def __init__(self) -> None:
        self.jobs: list[tuple[dict[str, Any], Future[dict[str, Any] | None]]] = []

    def start(self) -> None:
        pass

    def submit(self, job: dict[str, Any]) -> Future[dict[str, Any] | None]:
        future: Future[dict[str, Any] | None] = Future()
        self.jobs.append((job, future))
        return future


@pytest.fixture
def stand(monkeypatch: Any, db: Any) -> _Stand:
    if connection.vendor == "postgresql":  # it bumps the counters at commit; these tests never commit
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    renderer = _Stand()
    monkeypatch.setattr(live, "renderer", renderer)
    monkeypatch.setitem(settings.LIQO_DASH, "LIVE_RENDER_WAIT_MS", 50)
    live.memory.forget()
    return renderer


def _moved(monkeypatch: Any, phase: str) -> None:
    Namespace.objects.filter(name="shop").update(offloading_phase=phase)
    now = live.now_ms()
    monkeypatch.setattr(live, "now_ms", lambda: now + 2_000)  # past the holder's HOLD_S


def _poll(client: Client, etag: str) -> Any:
    return client.get(OVERVIEW, HTTP_X_LIVE_POLL="1", HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag)


def test_a_slow_render_aside_keeps_what_the_viewer_holds_and_serves_the_next_polls(
    fleet: Any, django_user_model: Any, stand: _Stand, monkeypatch: Any
) -> None:
    vera, nico = _viewer(django_user_model, "vera"), _viewer(django_user_model, "nico")
    held = _poll(vera, "")
    assert held.status_code == 200 and not stand.jobs  # holding nothing: rendered in the poll
    etag = held["ETag"]
    _moved(monkeypatch, "SomeFailed")
    started = time.monotonic()
    waiting = _poll(vera, etag)
    assert waiting.status_code == 304 and waiting["ETag"] == etag  # the renderer did not answer in 50 ms
    assert time.monotonic() - started < 2
    ((job, future),) = stand.jobs
    assert job["environ"]["PATH_INFO"] == OVERVIEW and job["environ"]["HTTP_HX_REQUEST"] == "true"
    assert job["aside"]["key"].startswith("liqo-dash:live:") and job["aside"]["version"]
    assert liveaside.ASIDE not in job["environ"]
    # Meanwhile the lease is held: another viewer of the same access keeps what it has, no second job.
    assert _poll(nico, _poll(nico, "")["ETag"]).status_code in (200, 304) and len(stand.jobs) == 1

    # The renderer answers (as liveaside.run would): the lease is released and the render is kept, so
    # the next poll of either viewer gets it, shared, without another job.
    body = b'<main id="live">aside render SomeFailed</main>'
    future.set_result(
        {
            "status": 200,
            "headers": [["Content-Type", "text/html; charset=utf-8"], ["ETag", '"x.1"'], ["X-Live", "rendered"]],
            "cookies": [],
            "content": body.decode("latin-1"),
            "reuse_ms": 5_000,
            "id": 1,
        }
    )
    assert cache.get(job["aside"]["key"] + ":lease") is None
    shared = _poll(vera, etag)
    assert shared.status_code == 200 and shared["X-Live"] == "shared" and shared.content == body
    assert len(stand.jobs) == 1


def test_a_renderer_that_died_with_the_render_frees_the_region(
    fleet: Any, django_user_model: Any, stand: _Stand, monkeypatch: Any
) -> None:
    vera = _viewer(django_user_model, "vera")
    etag = _poll(vera, "")["ETag"]
    _moved(monkeypatch, "SomeFailed")
    assert _poll(vera, etag).status_code == 304
    ((job, future),) = stand.jobs
    future.set_result(None)  # the renderer died before it answered
    assert cache.get(job["aside"]["key"] + ":lease") is None
    # The next poll may render again (a new job: the lease is free).
    monkeypatch.setattr(live, "now_ms", lambda: live.time.time() * 1000 + 4_000)
    assert _poll(vera, etag).status_code == 304 and len(stand.jobs) == 2


def test_a_render_made_aside_is_checked_as_any_request(fleet: Any, django_user_model: Any) -> None:
    """The renderer runs the poll's request through the whole chain: a session that ended meanwhile gets
    what the chain answers (no region), and the region is what the view renders for that user."""
    vera = _viewer(django_user_model, "vera")
    request = vera.get(OVERVIEW, HTTP_X_LIVE_POLL="1", HTTP_HX_REQUEST="true").wsgi_request
    job = liveaside.job_of(request, "v", live.now_ms(), "liqo-dash:live:test")
    handler = WSGIHandler()
    # As the test client does: the request signals must not close the test's own connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        answer = liveaside.run(handler, {**job, "id": 1})
        vera.logout()
        refused = liveaside.run(handler, {**job, "id": 2})
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    assert answer["status"] == 200 and 'id="live"' in answer["content"] and answer["reuse_ms"]
    assert ("X-Live", "rendered") in [tuple(pair) for pair in answer["headers"]]
    assert refused["status"] in (302, 403) and refused["reuse_ms"] is None
