"""A web process's copies of the shared live renders (offloading/views/livememory.py): the newer render
wins, the copies are bounded by bytes and by age, and a poll the copy decides never reads the shared
cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client

from offloading.models import Namespace
from offloading.views import live
from offloading.views.livememory import RenderMemory, ViewerMemory

POLL = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}


@dataclass(frozen=True)
class _Render:
    read_ms: int
    content: bytes


def test_the_newer_render_wins() -> None:
    memory = RenderMemory(max_bytes=1000, max_age_ms=10_000)
    memory.keep("a", _Render(200, b"new"))
    memory.keep("a", _Render(100, b"old"))  # another process's older one, read later
    kept = memory.get("a", now_ms=300)
    assert kept is not None and kept.content == b"new"
    memory.keep("a", _Render(400, b"newer"))
    kept = memory.get("a", now_ms=500)
    assert kept is not None and kept.content == b"newer" and memory.size() == (1, 5)


def test_bounded_by_bytes_least_recently_used_first() -> None:
    memory = RenderMemory(max_bytes=10, max_age_ms=10_000)
    memory.keep("a", _Render(1, b"aaaa"))
    memory.keep("b", _Render(1, b"bbbb"))
    assert memory.get("a", now_ms=2) is not None  # a used last
    memory.keep("c", _Render(1, b"cccc"))
    assert memory.get("b", now_ms=2) is None and memory.get("a", now_ms=2) is not None
    assert memory.size() == (2, 8)
    memory.keep("huge", _Render(1, b"x" * 11))  # bigger than the whole memory: not kept, nothing dropped
    assert memory.get("huge", now_ms=2) is None and memory.size() == (2, 8)


def test_a_copy_older_than_the_shared_cache_keeps_is_never_used() -> None:
    memory = RenderMemory(max_bytes=100, max_age_ms=30_000)
    memory.keep("a", _Render(1_000, b"region"))
    assert memory.get("a", now_ms=31_000) is not None
    assert memory.get("a", now_ms=31_001) is None and memory.size() == (0, 0)


@pytest.mark.django_db
def test_a_poll_the_copy_decides_does_not_read_the_shared_cache(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    if connection.vendor == "postgresql":  # the counters are bumped at commit, which this test never does
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    clients = []
    for name in ("ann", "bob"):
        user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
        user.groups.add(Group.objects.get(name="viewer"))
        client = Client()
        client.force_login(user)
        clients.append(client)
    ann, bob = clients
    first = ann.get("/", **POLL)
    Namespace.objects.filter(name="shop").update(offloading_phase="SomeFailed")
    reads: list[str] = []
    real_get = live.cache.get
    monkeypatch.setattr(live.cache, "get", lambda key, *a, **k: reads.append(key) or real_get(key, *a, **k))
    # Bob holds nothing: Ann's render, newer than that and within its window, from this process's copy.
    shared = bob.get("/", **POLL)
    assert shared["X-Live"] == "shared" and shared.content.startswith(b'<div id="live"')
    # Ann holds it and the counters moved within its window: she keeps it, also without a round trip.
    assert ann.get("/", HTTP_IF_NONE_MATCH=first["ETag"], **POLL).status_code == 304
    assert not [key for key in reads if key.startswith("liqo-dash:live:")]
    # Without this process's copy, the same poll reads the shared cache (another process's render).
    live.memory.forget()
    again = Client()
    again.force_login(django_user_model.objects.get(username="bob"))
    assert again.get("/", **POLL)["X-Live"] == "shared"
    assert [key for key in reads if key.startswith("liqo-dash:live:")]


def test_a_viewer_is_remembered_only_under_its_counters_and_until_its_session_expires() -> None:
    viewers = ViewerMemory(max_entries=10)
    viewers.keep("session-a", (3, 7), expires=1_000.0, value="vera")
    assert viewers.get("session-a", (3, 7), now=999.0) == "vera"
    assert viewers.get("session-b", (3, 7), now=999.0) is None
    assert viewers.get("session-a", (3, 8), now=999.0) is None  # a session or user written since
    assert viewers.get("session-a", (3, 7), now=999.0) is None, "a stale entry is dropped, not kept"
    viewers.keep("session-a", (3, 8), expires=1_000.0, value="vera")
    assert viewers.get("session-a", (3, 8), now=1_000.0) is None  # the session expired
    assert len(viewers) == 0


def test_viewers_are_bounded_least_recently_used_first() -> None:
    viewers = ViewerMemory(max_entries=2)
    viewers.keep("a", (1,), 100.0, "ann")
    viewers.keep("b", (1,), 100.0, "bob")
    assert viewers.get("a", (1,), 0.0) == "ann"  # a is now the most recently used
    viewers.keep("c", (1,), 100.0, "cid")
    assert len(viewers) == 2
    assert viewers.get("b", (1,), 0.0) is None
    assert viewers.get("a", (1,), 0.0) == "ann" and viewers.get("c", (1,), 0.0) == "cid"
