"""Renders shared between the viewers of a live region (offloading.views.live): while the counters move,
a region is rendered once per access (role, an operator's scopes) and reuse window, not once per viewer;
only the region travels to the others, never the page around it; viewers of another access never get
it; a poll never goes back to a render older than the one it holds; a single viewer still sees a change
at its next poll."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from offloading.models import Namespace
from offloading.views import live, livetags

pytestmark = pytest.mark.django_db

POLL = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}
OVERVIEW = "/"


@pytest.fixture(autouse=True)
def _immediate_bumps(db: Any) -> None:
    """PostgreSQL bumps the counters at commit; these tests never commit (as in test_live_version)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _person(django_user_model: Any, name: str, role: str, scope: str = "") -> Client:
    from django.contrib.auth.models import Group

    from access.models import Scope

    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    user.groups.add(Group.objects.get(name=role))
    if scope:
        Scope.objects.create(user=user, kind="glob", value=scope)
    client = Client()
    client.force_login(user)
    return client


def _poll(client: Client, url: str, etag: str = "") -> Any:
    return client.get(url, **POLL, **({"HTTP_IF_NONE_MATCH": etag} if etag else {}))


def _read_ms(response: Any) -> int:
    return int(response["ETag"].strip('"').split(".")[1], 16)


def _phase(phase: str) -> None:
    Namespace.objects.filter(name="shop").update(offloading_phase=phase)


def _later(monkeypatch: Any, seconds: float) -> None:
    """The clock of the live checks, ``seconds`` on from now."""
    now = live.now_ms()
    monkeypatch.setattr(live, "now_ms", lambda: now + int(seconds * 1000))


def test_a_viewer_of_the_same_access_gets_the_render_without_rendering(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    ann, bob = _person(django_user_model, "ann", "viewer"), _person(django_user_model, "bob", "viewer")
    first = _poll(ann, OVERVIEW)
    _phase("SomeFailed")
    _later(monkeypatch, 2.0)  # the holder's next poll, a render held for more than HOLD_S
    rendered = _poll(ann, OVERVIEW, first["ETag"])
    assert rendered.status_code == 200 and "SomeFailed" in rendered.content.decode()
    with CaptureQueriesContext(connection) as queries:
        shared = _poll(bob, OVERVIEW)
    assert shared.status_code == 200 and shared.content == rendered.content
    assert (rendered["X-Live"], shared["X-Live"]) == ("rendered", "shared")
    # The session, the user, the role's groups and the counters: nothing of the overview was read.
    tables = " ".join(q["sql"] for q in queries.captured_queries)
    assert len(queries) <= 5 and "offloading_namespace" not in tables and "offloading_cluster" not in tables
    # Bob's own ETag (never Ann's), of the same render.
    assert shared["ETag"] != rendered["ETag"] and _read_ms(shared) == _read_ms(rendered)
    assert _poll(bob, OVERVIEW, shared["ETag"]).status_code == 304


def test_only_the_region_travels_never_the_page_around_it(fleet: Any, django_user_model: Any) -> None:
    ann, bob = _person(django_user_model, "ann-the-viewer", "viewer"), _person(django_user_model, "bob", "viewer")
    page = ann.get(OVERVIEW).content.decode()
    assert "ann-the-viewer" in page and "X-CSRFToken" in page  # an ordinary visit: the whole page
    for client in (ann, bob):
        body = _poll(client, OVERVIEW).content.decode()
        assert body.startswith('<div id="live"') and body.endswith("</div>")
        assert "ann-the-viewer" not in body and "csrf" not in body.lower() and "<html" not in body


def test_viewers_of_another_access_never_get_it(fleet: Any, django_user_model: Any, monkeypatch: Any) -> None:
    Namespace.objects.create(name="team-a-web", labels={"team": "a"})
    olga = _person(django_user_model, "olga", "operator", scope="team-a-*")
    otto = _person(django_user_model, "otto", "operator", scope="team-b-*")
    vera = _person(django_user_model, "vera", "viewer")
    url = reverse("offloading:namespace_list") + "?q=team-a"
    offload = reverse("offloading:namespace_offload", args=["team-a-web"])
    first = _poll(olga, url)
    assert offload in first.content.decode()
    _phase("SomeFailed")  # the counters move: a render is reused only within one access
    _later(monkeypatch, 2.0)  # the holder's next poll, a render held for more than HOLD_S
    for other in (otto, vera):
        body = _poll(other, url).content.decode()
        assert offload not in body and "read only" in body
    assert _poll(olga, url, first["ETag"]).status_code == 200  # moved: olga's own render again
    # An operator with the same scopes shares olga's.
    twin = _person(django_user_model, "olga-twin", "operator", scope="team-a-*")
    assert offload in _poll(twin, url).content.decode()


def test_a_single_viewer_sees_each_change_at_its_next_poll(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    ann = _person(django_user_model, "ann", "viewer")
    etag = _poll(ann, OVERVIEW)["ETag"]
    for phase in ("SomeFailed", "Ready", "SomeFailed"):
        _phase(phase)
        _later(monkeypatch, 2.0)  # the overview's next poll (every 5 s; a 2 s poll is past a 1 s window too)
        moved = _poll(ann, OVERVIEW, etag)
        assert moved.status_code == 200 and moved["ETag"] != etag
        assert phase in moved.content.decode()
        etag = moved["ETag"]
        assert _poll(ann, OVERVIEW, etag).status_code == 304


def test_a_holder_is_not_rendered_again_within_a_second(fleet: Any, django_user_model: Any, monkeypatch: Any) -> None:
    """While the counters move many times a second (a bulk applying), a viewer holding the newest render
    keeps it until it is HOLD_S old, then the first poll renders again: a region costs at most one
    render a second per access, whoever polls it; a viewer alone (polls 2-5 s apart) sees every change."""
    ann, bob = (_person(django_user_model, n, "viewer") for n in ("ann", "bob"))
    first = _poll(ann, OVERVIEW)
    bobs = _poll(bob, OVERVIEW)  # the same render, under Bob's own ETag
    _phase("SomeFailed")
    with CaptureQueriesContext(connection) as queries:
        held = _poll(ann, OVERVIEW, first["ETag"])
    assert held.status_code == 304 and held["ETag"] == first["ETag"]
    assert not any("offloading_namespace" in q["sql"] for q in queries.captured_queries)  # nothing rendered
    assert _poll(bob, OVERVIEW, bobs["ETag"]).status_code == 304  # the same for any holder of that render
    _later(monkeypatch, livetags.HOLD_S + 0.01)
    moved = _poll(ann, OVERVIEW, first["ETag"])
    assert moved.status_code == 200 and "SomeFailed" in moved.content.decode()
    assert moved["X-Live"] == "rendered"


def test_holding_another_users_etag_is_holding_nothing(fleet: Any, django_user_model: Any) -> None:
    ann, bob = (_person(django_user_model, n, "viewer") for n in ("ann", "bob"))
    first = _poll(ann, OVERVIEW)
    _phase("SomeFailed")
    assert _poll(ann, OVERVIEW, first["ETag"]).status_code == 304  # Ann holds it: within the second
    answer = _poll(bob, OVERVIEW, first["ETag"])  # Bob sends Ann's: he holds nothing of his own
    assert answer.status_code == 200 and "SomeFailed" in answer.content.decode()


def test_another_viewer_gets_a_newer_render_only_within_its_reuse_window(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    ann, bob, cid = (_person(django_user_model, n, "viewer") for n in ("ann", "bob", "cid"))
    kept = _poll(ann, OVERVIEW)
    assert "SomeFailed" not in kept.content.decode()
    _phase("SomeFailed")
    # Within the window, bob gets ann's render (newer than what he holds: nothing), not the moved rows.
    assert _poll(bob, OVERVIEW).content == kept.content
    now = live.now_ms()
    monkeypatch.setattr(live, "now_ms", lambda: now + int(livetags.REUSE_MAX_S * 1000) + 1)
    assert "SomeFailed" in _poll(cid, OVERVIEW).content.decode()  # past the window: rendered again


def test_a_poll_never_goes_back_to_an_older_render_than_it_holds(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    ann = _person(django_user_model, "ann", "viewer")
    key = livetags.shared_key("home", OVERVIEW, "true", "viewer")
    first = _poll(ann, OVERVIEW)
    older = cache.get(key)
    assert older is not None and older.content == first.content
    _phase("SomeFailed")
    _later(monkeypatch, 2.0)  # the holder's next poll, a render held for more than HOLD_S
    newer = _poll(ann, OVERVIEW, first["ETag"])
    assert "SomeFailed" in newer.content.decode()
    cache.set(key, older)  # another process's (or replica's) store, behind this viewer
    _phase("NoClusterSelected")
    _later(monkeypatch, 2.0)  # the holder's next poll, a render held for more than HOLD_S
    again = _poll(ann, OVERVIEW, newer["ETag"])
    assert again.status_code == 200 and "NoClusterSelected" in again.content.decode()
    assert _read_ms(again) > _read_ms(newer) > _read_ms(first)


def test_while_another_viewer_renders_it_a_holder_keeps_what_it_has(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    ann = _person(django_user_model, "ann", "viewer")
    key = livetags.shared_key("home", OVERVIEW, "true", "viewer")
    first = _poll(ann, OVERVIEW)
    _phase("SomeFailed")
    _later(monkeypatch, 2.0)  # the holder's next poll, a render held for more than HOLD_S
    cache.add(key + ":lease", 1)  # a render of the same region and access in progress elsewhere
    kept = _poll(ann, OVERVIEW, first["ETag"])
    assert kept.status_code == 304 and kept["ETag"] == first["ETag"]
    cache.delete(key + ":lease")
    assert "SomeFailed" in _poll(ann, OVERVIEW, first["ETag"]).content.decode()


def test_while_another_viewer_renders_it_the_answer_comes_before_the_session_middleware(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    """During a bulk most polls of a moved region find its render in flight: answered by
    LivePollMiddleware (no request.user set), as the view's own poll handling would answer them."""
    ann = _person(django_user_model, "ann", "viewer")
    bob = _person(django_user_model, "bob", "viewer")
    key = livetags.shared_key("home", OVERVIEW, "true", "viewer")
    first = _poll(ann, OVERVIEW)
    held_by_bob = _poll(bob, OVERVIEW)
    _phase("SomeFailed")
    _later(monkeypatch, 2.0)
    newer = _poll(ann, OVERVIEW, first["ETag"])  # ann renders the moved region: kept for bob
    assert newer.status_code == 200 and "SomeFailed" in newer.content.decode()
    _phase("Ready")
    _later(monkeypatch, 14.0)  # past every reuse window: without a render in flight, a poll would render
    cache.add(key + ":lease", 1)
    try:
        kept = _poll(ann, OVERVIEW, newer["ETag"])
        assert kept.status_code == 304 and kept["ETag"] == newer["ETag"]
        assert not hasattr(kept.wsgi_request, "user"), "answered before the authentication middleware"
        # bob holds an older render than the kept one: he gets it, early too, rather than a 304.
        caught_up = _poll(bob, OVERVIEW, held_by_bob["ETag"])
        assert caught_up.status_code == 200 and caught_up["X-Live"] == "shared"
        assert "SomeFailed" in caught_up.content.decode() and not hasattr(caught_up.wsgi_request, "user")
    finally:
        cache.delete(key + ":lease")
    rendered = _poll(ann, OVERVIEW, newer["ETag"])
    assert rendered.status_code == 200 and "SomeFailed" not in rendered.content.decode()


def test_without_the_cache_every_poll_renders_for_itself(fleet: Any, django_user_model: Any, monkeypatch: Any) -> None:
    class Away:
        def __getattr__(self, name: str) -> Any:
            def fail(*args: Any, **kwargs: Any) -> Any:
                raise ConnectionError("the cache is away")

            return fail

    ann = _person(django_user_model, "ann", "viewer")
    first = _poll(ann, OVERVIEW)
    monkeypatch.setattr(live, "cache", Away())
    _phase("SomeFailed")
    _later(monkeypatch, 2.0)
    moved = _poll(ann, OVERVIEW, first["ETag"])
    assert moved.status_code == 200 and moved["X-Live"] == "rendered" and "SomeFailed" in moved.content.decode()
    assert _poll(ann, OVERVIEW, moved["ETag"]).status_code == 304


def test_a_304_names_the_etag_that_matched(fleet: Any, django_user_model: Any) -> None:
    ann = _person(django_user_model, "ann", "viewer")
    etag = _poll(ann, OVERVIEW)["ETag"]
    answer = _poll(ann, OVERVIEW, f'"{"0" * 32}.1", W/{etag}')
    assert answer.status_code == 304 and answer["ETag"] == f"W/{etag}"


@pytest.mark.parametrize(
    ("html", "found"),
    [
        ('<main><div id="live" data-live><div>a</div><div><div>b</div></div></div><p>after</p></main>', True),
        ('<div data-id="live">x</div><section id="live">y</section>', True),
        ('<div id="other"></div>', False),
        ('<div id="live"><div>never closed</div>', False),
    ],
)
def test_region_of_finds_the_element_with_its_children(html: str, found: bool) -> None:
    region = livetags.region_of(html, "live")
    if not found:
        assert region is None
        return
    assert region is not None and 'id="live"' in region and "after" not in region and "data-id" not in region
    assert region.count("<div") == region.count("</div>")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_page_region_answered_alone_is_swapped_in_by_the_browser(
    browser_page: Any, live_server: Any, admin_user: Any, fleet: Any
) -> None:
    from playwright.sync_api import expect

    from offloading.models import Cluster
    from tests.browser import login

    page = browser_page
    answers: list[tuple[int, str]] = []
    page.on("response", lambda r: answers.append((r.status, r.body().decode()[:5] if r.status == 200 else "")))
    login(page, live_server)
    page.goto(f"{live_server.url}/clusters/")
    expect(page.locator("#live")).to_contain_text("milan")
    page.evaluate("window.__notReloaded = true")
    Cluster.objects.filter(cluster_id="milan").update(
        offloading_status="Unhealthy", modules={"offloading": {"status": "Unhealthy", "alerts": ["milan is full"]}}
    )
    expect(page.locator("#live")).to_contain_text("milan is full", timeout=30_000)
    assert page.evaluate("window.__notReloaded === true"), "a poll shows the change, not a reload"
    assert page.locator("#live").count() == 1 and page.locator("#live #live").count() == 0
    assert page.locator("details.user-menu").count() == 1  # the page around the region is still there
    assert (200, "<div ") in answers  # the poll's answer was the region alone
