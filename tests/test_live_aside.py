"""Renders aside (offloading/views/liveaside.py): a poll from a viewer who holds an older render of a
region whose counters moved starts the render in the web process's render thread and waits at most
LIVE_RENDER_WAIT_MS for it; a render that takes longer is answered 304 (the viewer keeps what it holds)
and kept for the next polls, of this viewer and of every viewer of the same access; a render that fails
aside is logged and leaves the region free to render again. On committed rows (transactional_db): the
render thread has its own database connection."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connections
from django.test import Client

from offloading.models import Namespace
from offloading.views import live, liveaside

pytestmark = pytest.mark.django_db(transaction=True)

POLL = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}
OVERVIEW = "/"


@pytest.fixture(autouse=True)
def _aside(monkeypatch: Any, transactional_db: Any) -> Iterator[None]:
    """Renders aside, and a render thread that reaches the test database: its own connection (as deployed)
    on a database file or a server; on SQLite's in-memory test database, which a second connection
    would not see, the test's connection, shared as Django's live server shares it."""
    monkeypatch.setitem(settings.LIQO_DASH, "LIVE_RENDER_WAIT_MS", 100)
    conn = connections["default"]
    shared = conn.vendor == "sqlite" and conn.is_in_memory_db()
    if shared:
        conn.inc_thread_sharing()
        liveaside.render_thread.submit(connections.__setitem__, "default", conn).result()
    yield
    if shared:
        liveaside.render_thread.submit(connections.__delitem__, "default").result()
        conn.dec_thread_sharing()


def _viewer(django_user_model: Any, name: str) -> Client:
    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])  # a flush (transactional_db) drops it
    client = Client()
    client.force_login(user)
    return client


def _poll(client: Client, etag: str = "") -> Any:
    return client.get(OVERVIEW, **POLL, **({"HTTP_IF_NONE_MATCH": etag} if etag else {}))


def _moved(monkeypatch: Any) -> None:
    """A phase written, and the live clock past the holder's HOLD_S."""
    Namespace.objects.filter(name="shop").update(offloading_phase="SomeFailed")
    now = live.now_ms()
    monkeypatch.setattr(live, "now_ms", lambda: now + 2_000)


def _slow_renders(monkeypatch: Any, seconds: float, entered: threading.Event | None = None) -> None:
    original = live._render

    def slow(*args: Any, **kwargs: Any) -> Any:
        if entered is not None:
            entered.set()
        time.sleep(seconds)
        return original(*args, **kwargs)

    monkeypatch.setattr(live, "_render", slow)


def _until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_quick_render_aside_is_the_poll_answer(fleet: Any, django_user_model: Any, monkeypatch: Any) -> None:
    ann = _viewer(django_user_model, "ann")
    first = _poll(ann)
    assert first.status_code == 200
    _moved(monkeypatch)
    answer = _poll(ann, first["ETag"])
    assert answer.status_code == 200 and answer["X-Live"] == "rendered"
    assert "SomeFailed" in answer.content.decode()


def test_a_slow_render_is_a_304_then_the_next_polls_share_it(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    ann, bob = _viewer(django_user_model, "ann"), _viewer(django_user_model, "bob")
    first, bobs = _poll(ann), _poll(bob)
    assert first.status_code == bobs.status_code == 200
    _moved(monkeypatch)
    entered = threading.Event()
    _slow_renders(monkeypatch, 0.6, entered)
    started = time.monotonic()
    kept = _poll(ann, first["ETag"])
    waited = time.monotonic() - started
    assert kept.status_code == 304 and kept["ETag"] == first["ETag"]
    assert entered.is_set() and waited < 0.5, waited  # it did not wait for the render
    # Bob's poll meanwhile: the render is under way (its lease held), he keeps what he has too.
    assert _poll(bob, bobs["ETag"]).status_code == 304
    liveaside.render_thread.submit(lambda: None).result(timeout=5)  # queued behind the render: it has ended
    for client, etag in ((ann, first["ETag"]), (bob, bobs["ETag"])):
        shared = _poll(client, etag)
        assert shared.status_code == 200 and shared["X-Live"] == "shared"
        assert "SomeFailed" in shared.content.decode()


def test_a_failed_render_aside_is_logged_and_frees_the_region(
    fleet: Any, django_user_model: Any, monkeypatch: Any, caplog: Any
) -> None:
    ann = _viewer(django_user_model, "ann")
    first = _poll(ann)
    _moved(monkeypatch)
    original = live._render
    failing = threading.Event()

    def broken(*args: Any, **kwargs: Any) -> Any:
        failing.set()
        time.sleep(0.3)
        raise RuntimeError("the template broke")

    monkeypatch.setattr(live, "_render", broken)
    with caplog.at_level(logging.ERROR, logger="offloading.views.live"):
        assert _poll(ann, first["ETag"]).status_code == 304
        _until(lambda: any("rendered aside failed" in r.getMessage() for r in caplog.records))
    monkeypatch.setattr(live, "_render", original)
    again = _poll(ann, first["ETag"])  # the lease was released: this poll renders
    assert again.status_code == 200 and "SomeFailed" in again.content.decode()


def test_a_viewer_who_holds_nothing_renders_in_its_own_poll(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    ann = _viewer(django_user_model, "ann")
    _poll(ann)
    _moved(monkeypatch)
    _slow_renders(monkeypatch, 0.3)
    started = time.monotonic()
    answer = _poll(ann)  # no ETag: nothing to keep meanwhile
    assert answer.status_code == 200 and time.monotonic() - started >= 0.3
    assert threading.current_thread() is threading.main_thread()
