"""What one live poll costs: an idle poll (304), a shared answer and the freshness badge are answered by
offloading.middleware.LivePollMiddleware before the session, user and page middleware, with a bounded
number of plain indexed reads; and only for a session, user and role it recognises exactly: a poll
after a logout, a password change, a deactivation or a lost role goes through the whole chain, which
refuses it as before, and a shared render never crosses roles or an operator's scopes."""

from __future__ import annotations

import json
import re
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from access import roles
from access.models import Scope
from offloading import middleware
from offloading.models import Namespace, SnapshotState, livetriggers
from offloading.views import live, livetags
from tests import webproc
from tests.browser import login
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.django_db

POLL: dict[str, Any] = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}
OVERVIEW = "/"
LIST = "/namespaces/"


@pytest.fixture(autouse=True)
def _immediate_bumps(db: Any) -> None:
    """PostgreSQL bumps the counters at commit; these tests never commit (as in test_live_version)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _person(django_user_model: Any, name: str, role: str | None, scope: str = "") -> tuple[Any, Client]:
    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    if role:
        user.groups.add(Group.objects.get(name=role))
    if scope:
        Scope.objects.create(user=user, kind="glob", value=scope)
    client = Client()
    client.force_login(user)
    return user, client


def _poll(client: Client, url: str, etag: str = "") -> Any:
    headers: dict[str, Any] = {**POLL, **({"HTTP_IF_NONE_MATCH": etag} if etag else {})}
    return client.get(url, **headers)


def _early(response: Any) -> bool:
    """Whether the answer came before the authentication middleware (it never set request.user)."""
    return not hasattr(response.wsgi_request, "user")


_LATER_MS = [0]  # how far the live checks' clock runs ahead of the real one (below)


@pytest.fixture(autouse=True)
def _live_clock(monkeypatch: Any) -> None:
    """The live checks' clock: the real one, moved on by ``_phase``."""
    _LATER_MS[0] = 0
    monkeypatch.setattr(live, "now_ms", lambda: int(time.time() * 1000) + _LATER_MS[0])


def _phase(phase: str) -> None:
    """A write the overview shows; the viewers' next poll comes 2 s later, when the render they hold is
    more than a second old (a holder is not rendered again within livetags.HOLD_S)."""
    Namespace.objects.filter(name="shop").update(offloading_phase=phase)
    _next_poll()


def _next_poll() -> None:
    _LATER_MS[0] += 2000


# --------------------------------------------------------------------------------------------------
# The cost: a bounded number of reads, none of the page's


@pytest.mark.parametrize("url", [LIST, OVERVIEW, "/clusters/", "/matrix/", "/audit/"])
def test_an_idle_poll_is_answered_early_with_one_read(fleet: Any, django_user_model: Any, url: str) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    first = _poll(client, url)
    assert first.status_code == 200 and not _early(first)
    with CaptureQueriesContext(connection) as queries:
        idle = _poll(client, url, first["ETag"])
    assert idle.status_code == 304 and _early(idle)
    sql = [q["sql"] for q in queries.captured_queries]
    # The region's counters with the identity counters; the session and the user were read by the first
    # poll and are remembered while those counters stay.
    assert len(sql) == 1 and "offloading_liveversion" in sql[0], sql
    assert idle["ETag"] == first["ETag"] and idle["X-Request-ID"]


def test_a_viewer_is_read_again_once_a_session_or_user_is_written(fleet: Any, django_user_model: Any) -> None:
    """Another user's login (a session and a user written) moves the identity counters: the next poll
    reads its session and user again, then is remembered again."""
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    _person(django_user_model, "otto", "viewer")
    with CaptureQueriesContext(connection) as queries:
        assert _poll(client, LIST, etag).status_code == 304
    tables = [re.findall(r'FROM "?(\w+)', q["sql"])[0] for q in queries.captured_queries]
    assert tables == ["offloading_liveversion", "django_session", "auth_user"], tables
    with CaptureQueriesContext(connection) as queries:
        assert _poll(client, LIST, etag).status_code == 304
    assert len(queries) == 1


def test_a_renamed_group_ends_the_early_answers(fleet: Any, django_user_model: Any) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    Group.objects.filter(name="viewer").update(name="former-viewers")
    answer = _poll(client, LIST, etag)
    assert answer.status_code == 403 and not _early(answer)


def test_a_superuser_poll_is_answered_early(admin_client: Any, fleet: Any) -> None:
    first = _poll(admin_client, LIST)
    with CaptureQueriesContext(connection) as queries:
        idle = _poll(admin_client, LIST, first["ETag"])
    assert idle.status_code == 304 and _early(idle)
    assert len(queries) <= 3, [q["sql"] for q in queries.captured_queries]


def test_a_shared_answer_is_answered_early_with_three_reads_at_most(fleet: Any, django_user_model: Any) -> None:
    _, ann = _person(django_user_model, "ann", "viewer")
    _, bob = _person(django_user_model, "bob", "viewer")
    first = _poll(ann, OVERVIEW)
    _phase("SomeFailed")
    rendered = _poll(ann, OVERVIEW, first["ETag"])
    assert rendered["X-Live"] == "rendered" and "SomeFailed" in rendered.content.decode()
    with CaptureQueriesContext(connection) as queries:
        shared = _poll(bob, OVERVIEW)
    assert shared["X-Live"] == "shared" and shared.content == rendered.content and _early(shared)
    assert len(queries) <= 3, [q["sql"] for q in queries.captured_queries]
    assert shared["ETag"] != rendered["ETag"]  # Bob's own tag of the same render
    assert _poll(bob, OVERVIEW, shared["ETag"]).status_code == 304


def test_an_operator_shared_answer_reads_the_scopes_too(fleet: Any, django_user_model: Any) -> None:
    _, ann = _person(django_user_model, "ann", "operator", scope="shop*")
    _, bob = _person(django_user_model, "bob", "operator", scope="shop*")
    first = _poll(ann, OVERVIEW)
    _phase("SomeFailed")
    _poll(ann, OVERVIEW, first["ETag"])
    with CaptureQueriesContext(connection) as queries:
        shared = _poll(bob, OVERVIEW)
    assert shared["X-Live"] == "shared" and _early(shared)
    assert len(queries) <= 4, [q["sql"] for q in queries.captured_queries]


def test_the_freshness_badge_is_answered_early(fleet: Any, django_user_model: Any) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    url = reverse("offloading:freshness")
    first = _poll(client, url)
    assert first.status_code == 200 and b"freshness" in first.content and _early(first)
    with CaptureQueriesContext(connection) as queries:
        again = _poll(client, url, first["ETag"])
    assert again.status_code == 304 and _early(again)
    assert len(queries) <= 2, [q["sql"] for q in queries.captured_queries]  # the counters, the snapshot's state


def test_database_connections_are_kept_and_checked() -> None:
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is True


# --------------------------------------------------------------------------------------------------
# Who asks: the early answer recognises exactly what the whole chain would accept


def test_the_early_role_and_access_are_those_of_access_roles(fleet: Any, django_user_model: Any) -> None:
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "root-password-123")
    viewer, _ = _person(django_user_model, "vera", "viewer")
    operator, _ = _person(django_user_model, "otto", "operator", scope="team-a-*")
    team = Group.objects.create(name="team-b")
    operator.groups.add(team)
    Scope.objects.create(group=team, kind="selector", value="team=b")
    both, _ = _person(django_user_model, "bea", "viewer")
    both.groups.add(Group.objects.get(name="operator"))
    for user in (admin, viewer, operator, both):
        client = Client()
        client.force_login(user)
        request = client.get(LIST).wsgi_request
        found = middleware._viewer(request, (0, 0))
        assert found is not None and found[0].role == roles.role_of(user), user
        assert found[0].who == f"{user.pk}:{roles.role_of(user)}"
        assert found[1] == middleware._access(found[0]) == livetags.access_key(request), user
    assert json.loads(middleware._access(middleware._Viewer(operator.pk, roles.OPERATOR))) == [
        "operator",
        [["glob", "team-a-*"], ["selector", "team=b"]],
    ]


def _held(client: Client, url: str = LIST) -> str:
    first = _poll(client, url)
    assert first.status_code == 200
    assert _poll(client, url, first["ETag"]).status_code == 304
    return str(first["ETag"])


def test_a_logged_out_session_gets_no_304(fleet: Any, django_user_model: Any) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    client.logout()
    stolen = Client()
    stolen.cookies[settings.SESSION_COOKIE_NAME] = cookie
    answer = _poll(stolen, LIST, etag)
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]


def test_a_changed_password_ends_the_early_answers(fleet: Any, django_user_model: Any) -> None:
    user, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    user.set_password("another-password-456")
    user.save()
    answer = _poll(client, LIST, etag)
    assert answer.status_code == 302 and not _early(answer)


def test_a_deactivated_user_gets_no_304(fleet: Any, django_user_model: Any) -> None:
    user, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    django_user_model.objects.filter(pk=user.pk).update(is_active=False)
    answer = _poll(client, LIST, etag)
    assert answer.status_code == 302 and not _early(answer)


def test_a_user_who_lost_the_role_gets_no_304(fleet: Any, django_user_model: Any) -> None:
    user, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    user.groups.clear()
    answer = _poll(client, LIST, etag)
    assert answer.status_code == 403 and not _early(answer)


def test_a_shared_render_does_not_cross_an_operator_scope(fleet: Any, django_user_model: Any) -> None:
    _, ann = _person(django_user_model, "ann", "operator", scope="shop*")
    _, bob = _person(django_user_model, "bob", "operator", scope="other*")
    first = _poll(ann, OVERVIEW)
    _phase("SomeFailed")
    assert _poll(ann, OVERVIEW, first["ETag"])["X-Live"] == "rendered"
    answer = _poll(bob, OVERVIEW)
    assert answer["X-Live"] == "rendered" and not _early(answer)  # Bob's own render, through the chain


def test_a_poll_without_a_session_goes_through_the_chain(fleet: Any) -> None:
    answer = _poll(Client(), LIST, '"0.0"')
    assert answer.status_code == 302 and not _early(answer)


# --------------------------------------------------------------------------------------------------
# Review of the early answer (issue 30): never data nor a 304 for a session the chain would not accept,
# never across users, roles or scopes; nothing at all for a request that is not a live poll.


def test_an_expired_session_gets_no_304(fleet: Any, django_user_model: Any) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    answer = _poll(client, LIST, etag)
    assert answer.status_code == 302 and not _early(answer) and "ETag" not in answer


def test_an_unknown_or_forged_session_gets_no_304(fleet: Any, django_user_model: Any) -> None:
    user, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    # A session key nobody was given.
    guessed = Client()
    guessed.cookies[settings.SESSION_COOKIE_NAME] = "x" * 32
    answer = _poll(guessed, LIST, etag)
    assert answer.status_code == 302 and not _early(answer)
    # Vera's session row with its data signed by another key (a forged or a stale row): not hers.
    forged = SessionStore()
    with override_settings(SECRET_KEY="another-key-" + "0" * 50, SECRET_KEY_FALLBACKS=[]):
        data = forged.encode(dict(client.session.items()))
    Session.objects.filter(session_key=key).update(session_data=data)
    answer = _poll(client, LIST, etag)
    assert answer.status_code == 302 and not _early(answer)
    # A session that names another backend than the one this middleware checks goes to the chain.
    _, other = _person(django_user_model, "otto", "viewer")
    etag = _held(other, OVERVIEW)
    session = other.session
    session["_auth_user_backend"] = "django.contrib.auth.backends.RemoteUserBackend"
    session.save()
    answer = _poll(other, OVERVIEW, etag)
    assert answer.status_code == 302 and not _early(answer)  # a backend not configured: signed out


def test_a_user_model_with_its_own_session_hash_is_left_to_the_chain(
    fleet: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    original = django_user_model.get_session_auth_hash
    monkeypatch.setattr(django_user_model, "get_session_auth_hash", lambda self: original(self))
    answer = _poll(client, LIST, etag)
    assert answer.status_code == 304 and not _early(answer)  # the chain checked it, and agrees


def test_an_anonymous_poll_gets_no_etag_and_never_a_304(fleet: Any) -> None:
    anonymous = Client()
    first = _poll(anonymous, LIST)
    assert first.status_code == 302 and "ETag" not in first
    # What a poll with no session would have held before: the hash of the counters for nobody ("-").
    version = live.data_version(live.region_kinds("namespace_list"))
    request = first.wsgi_request
    guessed = f'"{livetags.digest(version, request, "-")}.{live.now_ms():x}"'
    answer = _poll(anonymous, LIST, guessed)
    assert answer.status_code == 302 and "ETag" not in answer and not _early(answer)


def test_a_refused_or_missing_region_gets_no_etag(fleet: Any, django_user_model: Any) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    missing = _poll(client, reverse("offloading:namespace_status", args=["no-such-namespace"]))
    assert missing.status_code == 404 and "ETag" not in missing
    user, lost = _person(django_user_model, "lou", "viewer")
    user.groups.clear()
    refused = _poll(lost, LIST)
    assert refused.status_code == 403 and "ETag" not in refused


def test_another_users_etag_is_never_a_304(fleet: Any, django_user_model: Any) -> None:
    _, ann = _person(django_user_model, "ann", "viewer")
    _, bob = _person(django_user_model, "bob", "viewer")
    for url in (LIST, OVERVIEW, reverse("offloading:freshness")):
        etag = _poll(ann, url)["ETag"]
        assert _poll(ann, url, etag).status_code == 304
        answer = _poll(bob, url, etag)  # the same role, the same data: still Ann's tag, not Bob's
        assert answer.status_code == 200 and answer["ETag"] != etag, url


def test_a_shared_render_does_not_cross_roles(fleet: Any, django_user_model: Any) -> None:
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "root-password-123")
    boss = Client()
    boss.force_login(admin)
    _, vera = _person(django_user_model, "vera", "viewer")
    first = _poll(boss, OVERVIEW)
    _phase("SomeFailed")
    admins = _poll(boss, OVERVIEW, first["ETag"])
    assert admins["X-Live"] == "rendered"
    answer = _poll(vera, OVERVIEW)
    assert answer["X-Live"] == "rendered" and not _early(answer)  # Vera's own render, through the chain
    # And the other way round: a newer render of Vera's is never the admin's; the admin gets theirs.
    _phase("Ready")
    viewers = _poll(vera, OVERVIEW, answer["ETag"])
    assert viewers["X-Live"] == "rendered" and viewers.content != admins.content
    # Past the longest window the admin's render can have (ten times its cost: longer on a loaded machine).
    _LATER_MS[0] += int(livetags.REUSE_MAX_S * 1000)
    again = _poll(boss, OVERVIEW)  # the admin's own render again
    assert again["X-Live"] == "rendered" and again.content != viewers.content


def test_a_shared_render_carries_nothing_of_the_user_who_rendered_it(fleet: Any, django_user_model: Any) -> None:
    _, ann = _person(django_user_model, "annabel", "viewer")
    _, bob = _person(django_user_model, "bob", "viewer")
    page = ann.get(OVERVIEW)  # the page around the region: Ann's CSRF token, her name in the menu
    token = page.context["csrf_token"]
    first = _poll(ann, OVERVIEW)
    _phase("SomeFailed")
    rendered = _poll(ann, OVERVIEW, first["ETag"])
    shared = _poll(bob, OVERVIEW)
    assert shared["X-Live"] == "shared" and shared.content == rendered.content
    body = shared.content.decode()
    assert str(token) not in body and "annabel" not in body and "csrf" not in body.lower()


def test_early_answers_are_private(fleet: Any, django_user_model: Any) -> None:
    _, ann = _person(django_user_model, "ann", "viewer")
    _, bob = _person(django_user_model, "bob", "viewer")
    first = _poll(ann, OVERVIEW)
    idle = _poll(ann, OVERVIEW, first["ETag"])
    _phase("SomeFailed")
    _poll(ann, OVERVIEW, first["ETag"])
    shared = _poll(bob, OVERVIEW)
    badge = _poll(ann, reverse("offloading:freshness"))
    badge_idle = _poll(ann, reverse("offloading:freshness"), badge["ETag"])
    for answer in (idle, shared, badge, badge_idle):
        assert _early(answer)
        # No shared cache may keep one user's answer for another: the chain's Vary: Cookie, no-store.
        assert answer["Cache-Control"] == "no-store"
        assert "Cookie" in answer["Vary"]
        assert answer["X-Frame-Options"] == "DENY"
        # The security middleware still wraps them (LivePollMiddleware comes after it): no sniffing, the
        # referrer policy and the opener policy, as on every answer.
        assert answer["X-Content-Type-Options"] == "nosniff"
        assert answer["Referrer-Policy"] and answer["Cross-Origin-Opener-Policy"]
        if answer.status_code == 200:
            assert answer["Content-Length"] == str(len(answer.content))
    # The chain's poll answers are as private.
    rendered = _poll(ann, OVERVIEW, first["ETag"])
    assert not _early(rendered) or rendered["X-Live"] == "shared"
    assert rendered["Cache-Control"] == "no-store" and "Cookie" in rendered["Vary"]


def test_scopes_shape_what_an_operator_poll_returns(fleet: Any, django_user_model: Any) -> None:
    """A change out of an operator's scope moves a counter (one per kind, for everyone), but what the
    poll returns is the operator's own: the same region as before, never a render of other scopes;
    a change of the operator's own scopes moves their version (their controls follow)."""
    ann_user, ann = _person(django_user_model, "ann", "operator", scope="shop*")
    _, bob = _person(django_user_model, "bob", "operator", scope="pay*")
    status = reverse("offloading:namespace_status", args=["shop"])
    held = _poll(ann, status)
    assert held.status_code in (200, 286) and _poll(ann, status, held["ETag"]).status_code == 304
    # Bob renders the region for his scopes after a change in his scope, out of Ann's.
    bob_first = _poll(bob, status)
    Namespace.objects.filter(name="payments").update(labels={"team": "pay", "moved": "yes"})
    _next_poll()
    bob_now = _poll(bob, status, bob_first["ETag"])
    assert bob_now.status_code in (200, 286)
    answer = _poll(ann, status, held["ETag"])
    # Ann's answer: rendered for her (never Bob's render), and the same region she holds.
    assert answer.status_code in (200, 286) and answer["X-Live"] == "rendered"
    assert answer.content == held.content
    assert _poll(ann, status, answer["ETag"]).status_code == 304
    # Her scopes change: the version she holds is no longer current, and what she gets is for her new
    # scopes (the shared render of her old ones is not reused across the change).
    Scope.objects.create(user=ann_user, kind="glob", value="pay*")
    _next_poll()
    moved = _poll(ann, status, answer["ETag"])
    assert moved.status_code in (200, 286) and moved["ETag"] != answer["ETag"]
    assert middleware._access(middleware._Viewer(ann_user.pk, roles.OPERATOR)) == livetags.access_of(
        roles.OPERATOR, [("glob", "pay*"), ("glob", "shop*")]
    )


def test_an_operator_access_is_unambiguous() -> None:
    """Scopes are kept apart in the shared key's access: no value can make two sets of scopes read as
    one (a glob with a separator in it, were it ever stored unvalidated)."""
    one = livetags.access_of(roles.OPERATOR, [("glob", "a|glob=b")])
    two = livetags.access_of(roles.OPERATOR, [("glob", "a"), ("glob", "b")])
    assert one != two
    assert livetags.access_of(roles.OPERATOR, [("glob", "b"), ("glob", "a"), ("glob", "a")]) == two
    assert livetags.access_of(roles.VIEWER, [("glob", "a")]) == roles.VIEWER
    # The parts of a shared key and of an ETag are kept apart too: the URL and HX-Request are the client's.
    assert livetags.shared_key("home", "/?a", "true|admin", "viewer") != livetags.shared_key(
        "home", "/?a|true", "admin", "viewer"
    )


@pytest.mark.parametrize(
    ("method", "header", "url"),
    [
        ("get", None, LIST),  # a page, not a poll (even with a matching If-None-Match)
        ("get", "0", LIST),
        ("get", "true", LIST),
        ("post", "1", LIST),
        ("head", "1", LIST),
        ("get", "1", "/namespaces/shop/"),  # not a live region
        ("get", "1", "/api/v1/namespaces/"),
        ("get", "1", "/no/such/page/"),
    ],
)
def test_the_middleware_does_nothing_for_what_is_not_a_live_poll(
    fleet: Any, django_user_model: Any, monkeypatch: Any, method: str, header: str | None, url: str
) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    looked: list[Any] = []
    monkeypatch.setattr(middleware, "_viewer", lambda request: looked.append(request))
    headers: dict[str, Any] = {"HTTP_IF_NONE_MATCH": etag, "HTTP_HX_REQUEST": "true"}
    if header is not None:
        headers["HTTP_X_LIVE_POLL"] = header
    answer = getattr(client, method)(url, **headers)
    assert not looked and not _early(answer) and answer.status_code != 304


def test_a_poll_answered_early_is_what_the_chain_answers(fleet: Any, django_user_model: Any, monkeypatch: Any) -> None:
    """The same poll with the early answer switched off: the same status and ETag (a 304 is a 304 for
    the same user only), so the middleware decides nothing the chain would not."""
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    early = _poll(client, LIST, etag)
    monkeypatch.setattr(middleware, "_viewer", lambda request, marks: None)
    chain = _poll(client, LIST, etag)
    assert early.status_code == chain.status_code == 304 and _early(early) and not _early(chain)
    assert early["ETag"] == chain["ETag"]


# --------------------------------------------------------------------------------------------------
# The freshness badge: a 304 while what it shows is unchanged, the watcher's heartbeats included


def _beat(at: Any) -> None:
    SnapshotState.touch(None, last_success_at=at, last_attempt_at=at, last_error="")


def test_the_badge_answers_304_across_heartbeats_with_the_new_refresh_time(fleet: Any, django_user_model: Any) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    url = reverse("offloading:freshness")
    now = timezone.now()
    _beat(now)
    first = _poll(client, url)
    assert first.status_code == 200
    body = first.content.decode()
    shown = timezone.localtime(now)
    assert f'data-fresh-at="{shown.isoformat()}"' in body and first["X-Fresh-At"] == shown.isoformat()
    for seconds in (5, 10, 15):  # the watcher's heartbeats
        later = now + timedelta(seconds=seconds)
        _beat(later)
        with CaptureQueriesContext(connection) as queries:
            again = _poll(client, url, first["ETag"])
        assert again.status_code == 304 and _early(again) and again.content == b""
        assert again["X-Fresh-At"] == timezone.localtime(later).isoformat()  # the page ticks from it
        assert again["ETag"] == first["ETag"]
        assert len(queries) <= 3, [q["sql"] for q in queries.captured_queries]


def test_the_badge_renders_again_when_what_it_says_changes(fleet: Any, django_user_model: Any) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    url = reverse("offloading:freshness")
    now = timezone.now()
    _beat(now)
    fresh = _poll(client, url)
    # A failed refresh: the reason changes.
    SnapshotState.touch(None, last_attempt_at=now + timedelta(seconds=1), last_error="boom")
    failed = _poll(client, url, fresh["ETag"])
    assert failed.status_code == 200 and "boom" in failed.content.decode()
    # No refresh for long: the level the server sees moves (amber, red), with its reason.
    _beat(now - timedelta(minutes=10))
    stale = _poll(client, url, failed["ETag"])
    assert stale.status_code == 200 and 'data-level="red"' in stale.content.decode()
    assert _poll(client, url, stale["ETag"]).status_code == 304
    # Fresh again.
    _beat(timezone.now())
    back = _poll(client, url, stale["ETag"])
    assert back.status_code == 200 and 'data-level="fresh"' in back.content.decode()
    # No snapshot at all.
    SnapshotState.touch(None, last_success_at=None)
    none = _poll(client, url, back["ETag"])
    assert none.status_code == 200 and "no snapshot yet" in none.content.decode() and "X-Fresh-At" not in none


def test_the_page_script_takes_the_refresh_time_of_a_304() -> None:
    """static/js/liqo-dash.js puts X-Fresh-At of a badge's 304 on the badge it keeps (checked by the
    browser test below; here, that the script reads the header where it handles a 304)."""
    script = (settings.BASE_DIR / "static" / "js" / "liqo-dash.js").read_text()
    handler = script[script.index("xhr.status === 304") :]
    assert handler.index('getResponseHeader("X-Fresh-At")') < handler.index("return;")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_open_badge_follows_heartbeats_with_304s(
    browser_page: Any, live_server: Any, admin_user: Any, fleet: Any, settings: Any
) -> None:
    """Chromium on the live server: while the watcher's heartbeats move the refresh time, the badge's
    polls answer 304 and the page takes the refresh time from them, so the badge stays fresh (a 304
    that left the old time would age it amber within two intervals)."""
    # Amber after 16 s without news: more than a poll period (10 s) and a heartbeat (1 s) apart, less than
    # the time from the first render (at the first poll) to the second 304 (at the third, ~20 s later).
    settings.LIQO_DASH = {**settings.LIQO_DASH, "REFRESH_INTERVAL": 8.0}
    _beat(timezone.now())
    page = browser_page
    answers: list[tuple[int, str]] = []
    page.on(
        "response",
        lambda r: answers.append((r.status, r.headers.get("x-fresh-at", ""))) if "/live/freshness/" in r.url else None,
    )
    login(page, live_server)
    _beat(timezone.now())
    page.goto(f"{live_server.url}/namespaces/")
    badge = page.locator(".freshness[data-fresh-at]")
    opened_at = badge.get_attribute("data-fresh-at")
    page.evaluate("window.__notReloaded = true")
    levels = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(1 for status, _ in answers if status == 304) < 2:
        _beat(timezone.now())  # the watcher's heartbeat, every second
        page.wait_for_timeout(1000)
        levels.append(badge.get_attribute("data-level"))
    not_modified = [fresh_at for status, fresh_at in answers if status == 304]
    assert len(not_modified) >= 2 and all(not_modified), answers
    assert page.evaluate("window.__notReloaded === true")
    # The badge took the newest refresh time of the 304s, and never aged past fresh meanwhile.
    assert badge.get_attribute("data-fresh-at") != opened_at
    assert set(levels) == {"fresh"}, levels
    title = badge.get_attribute("title") or ""
    assert title.startswith("Last successful refresh at ") and not_modified[-1][11:19] in title


# --------------------------------------------------------------------------------------------------
# The web process: the Procfile's command, kept-alive connections, no access log unless asked


def _three_on_one_connection(port: int) -> list[tuple[int, str]]:
    """Three GETs of /healthz on one HTTP/1.1 connection, 3 s apart (a poller's pace): each answer's
    status and Connection header; the connection must stay open between them."""
    answers = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        stream = sock.makefile("rb")
        for i in range(3):
            if i:
                time.sleep(3)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            status = int(stream.readline().split()[1])
            headers = {}
            while (line := stream.readline()) not in (b"\r\n", b""):
                key, _, value = line.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            stream.read(int(headers.get("content-length", "0")))
            answers.append((status, headers.get("connection", "")))
    return answers


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_web_process_keeps_pollers_connections_and_logs_no_access(tmp_path: Path) -> None:
    quiet, port, quiet_log = webproc.web(tmp_path, "quiet", LOG_FORMAT="json")
    asked, asked_port, asked_log = webproc.web(tmp_path, "asked", GUNICORN_CMD_ARGS="--access-logfile -")
    try:
        for proc, where, log in ((quiet, port, quiet_log), (asked, asked_port, asked_log)):
            wait_until(lambda p=proc, w=where: p.poll() is not None or webproc.answers(w), 90, message="gunicorn")
            assert proc.poll() is None, log.read_text()
        # A poller's requests 3 s apart reuse one connection (gunicorn's default keep-alive, 2 s, closed it).
        for answers in (_three_on_one_connection(port), _three_on_one_connection(asked_port)):
            assert all(status == 200 and connection != "close" for status, connection in answers), answers
        time.sleep(0.5)
        # No access log by default, JSON logging included (gunicorn logs access whenever a logging
        # configuration is given); GUNICORN_CMD_ARGS turns it on.
        assert "/healthz" not in quiet_log.read_text(errors="replace"), quiet_log.read_text()
        assert asked_log.read_text(errors="replace").count("GET /healthz") >= 3, asked_log.read_text()
        # The configuration's worker class, though the command line names none.
        assert "Using worker: gthread" in asked_log.read_text(errors="replace")
    finally:
        webproc.stop(quiet)
        webproc.stop(asked)


def test_without_the_identity_triggers_no_viewer_is_remembered(fleet: Any, django_user_model: Any) -> None:
    """A database whose identity triggers are missing (migrated by an older version): a logout would move
    no counter, so every poll reads its session and user again."""
    _, client = _person(django_user_model, "vera", "viewer")
    etag = _held(client)
    with connection.cursor() as cursor:
        name = livetriggers.trigger_name("django_session", "DELETE")
        cursor.execute(f"DROP TRIGGER {name}" + (" ON django_session" if connection.vendor == "postgresql" else ""))
    middleware._identity_triggers.cache_clear()
    try:
        for _ in range(2):
            with CaptureQueriesContext(connection) as queries:
                assert _poll(client, LIST, etag).status_code == 304
            assert any("django_session" in q["sql"] for q in queries.captured_queries)
    finally:
        livetriggers.install(connection)
        middleware._identity_triggers.cache_clear()
    assert middleware._identity_triggers()


def test_identity_counters_that_go_back_forget_every_viewer(db: Any) -> None:
    """A restored backup or a failover that lost commits: a counter lower than one read before forgets
    every remembered viewer (an entry kept under a value the counter reaches again would match)."""
    middleware._highest[0] = ()
    middleware.viewers.keep("session-a", (7, 3), 2e9, "vera")
    assert middleware._may_remember((7, 3)) and middleware.viewers.get("session-a", (7, 3), 0.0) == "vera"
    assert middleware._may_remember((8, 3))  # counters only grew: nothing forgotten
    middleware.viewers.keep("session-a", (8, 3), 2e9, "vera")
    assert middleware._may_remember((8, 2))
    assert len(middleware.viewers) == 0
