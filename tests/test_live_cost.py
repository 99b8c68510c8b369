"""What one live poll costs: an idle poll (304), a shared answer and the freshness badge are answered by
offloading.middleware.LivePollMiddleware before the session, user and page middleware, with a bounded
number of plain indexed reads; and only for a session, user and role it recognises exactly: a poll
after a logout, a password change, a deactivation or a lost role goes through the whole chain, which
refuses it as before, and a shared render never crosses roles or an operator's scopes."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from access import roles
from access.models import Scope
from offloading import middleware
from offloading.models import Namespace
from offloading.views import live

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


def _phase(phase: str) -> None:
    Namespace.objects.filter(name="shop").update(offloading_phase=phase)


# --------------------------------------------------------------------------------------------------
# The cost: a bounded number of reads, none of the page's


@pytest.mark.parametrize("url", [LIST, OVERVIEW, "/clusters/", "/matrix/", "/audit/"])
def test_an_idle_poll_is_answered_early_with_three_reads(fleet: Any, django_user_model: Any, url: str) -> None:
    _, client = _person(django_user_model, "vera", "viewer")
    first = _poll(client, url)
    assert first.status_code == 200 and not _early(first)
    with CaptureQueriesContext(connection) as queries:
        idle = _poll(client, url, first["ETag"])
    assert idle.status_code == 304 and _early(idle)
    sql = [q["sql"] for q in queries.captured_queries]
    # The session, the user with the role's groups, the region's counters: nothing else.
    assert len(sql) <= 3, sql
    assert not any("offloading_" in q and "offloading_liveversion" not in q for q in sql), sql
    assert idle["ETag"] == first["ETag"] and idle["X-Request-ID"]


def test_a_superuser_poll_is_answered_early(admin_client: Any, fleet: Any) -> None:
    first = _poll(admin_client, LIST)
    with CaptureQueriesContext(connection) as queries:
        idle = _poll(admin_client, LIST, first["ETag"])
    assert idle.status_code == 304 and _early(idle)
    assert len(queries) <= 3, [q["sql"] for q in queries.captured_queries]


def test_a_shared_answer_is_answered_early_with_three_reads(fleet: Any, django_user_model: Any) -> None:
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
    assert len(queries) <= 3, [q["sql"] for q in queries.captured_queries]  # + the snapshot's state


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
        found = middleware._viewer(request)
        assert found is not None and found.role == roles.role_of(user), user
        assert found.who == f"{user.pk}:{roles.role_of(user)}"
        assert middleware._access(found) == live._access_key(request), user
    assert middleware._access(middleware._Viewer(operator.pk, roles.OPERATOR)) == (
        "operator|glob=team-a-*|selector=team=b"
    )


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
