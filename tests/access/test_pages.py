"""The pages of the access app: no role, API tokens, login lockout, features off unless configured."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from access.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_user_without_a_role_sees_only_the_no_role_page(make_user: Any, client: Any) -> None:
    client.force_login(make_user("nobody"))
    for url in ("/", "/namespaces/", reverse("access:tokens")):
        response = client.get(url, follow=True)
        assert response.status_code == 403, url
        assert "Your account has no role" in response.content.decode()
    assert client.get("/accounts/login/").status_code == 200
    assert client.post("/accounts/logout/").status_code == 302


def test_a_user_with_a_role_is_let_through(make_user: Any, client: Any) -> None:
    client.force_login(make_user("vera", "viewer"))
    response = client.get("/namespaces/")
    assert response.status_code == 200
    assert "Your account has no role" not in response.content.decode()
    assert response.context["access_role"] == "viewer"


def test_the_user_menu_context_has_the_operators_role_and_scopes(make_user: Any, client: Any) -> None:
    client.force_login(make_user("olga", "operator", globs=["team-a-*"], selectors=["team=a"]))
    response = client.get(reverse("access:tokens"))
    assert response.context["access_role"] == "operator"
    assert response.context["access_scopes"] == "label team=a, team-a-*"
    assert response.context["access_can_change"] is True


def test_tokens_are_shown_once_and_revoked_by_their_owner(make_user: Any, client: Any) -> None:
    alice = make_user("alice", "viewer")
    client.force_login(alice)
    response = client.post(reverse("access:tokens"), {"name": "laptop", "expires_in_days": 30})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    shown = re.search(r'<code id="token-value">(ldt_[^<]+)</code>', response.content.decode())
    assert shown is not None
    row = ApiToken.objects.get(user=alice, name="laptop")
    assert row.matches(shown.group(1))
    again = client.get(reverse("access:tokens")).content.decode()
    assert shown.group(1) not in again and f"ldt_{row.prefix}_…" in again
    response = client.post(reverse("access:token_revoke", args=[row.pk]))
    assert response.status_code == 302
    assert ApiToken.objects.get(pk=row.pk).revoked is not None


def test_users_see_and_revoke_only_their_own_tokens_admins_all(make_user: Any, client: Any, admin_user: Any) -> None:
    alice, bob = make_user("alice", "viewer"), make_user("bob", "operator")
    alices, _ = ApiToken.issue(alice, "alice-token")
    bobs, _ = ApiToken.issue(bob, "bob-token")
    client.force_login(alice)
    page = client.get(reverse("access:tokens")).content.decode()
    assert "alice-token" in page and "bob-token" not in page
    assert client.post(reverse("access:token_revoke", args=[bobs.pk])).status_code == 404
    assert ApiToken.objects.get(pk=bobs.pk).revoked is None
    client.force_login(admin_user)
    page = client.get(reverse("access:tokens")).content.decode()
    assert "alice-token" in page and "bob-token" in page and "<th>User</th>" in page
    assert client.post(reverse("access:token_revoke", args=[bobs.pk])).status_code == 302
    assert ApiToken.objects.get(pk=bobs.pk).revoked is not None
    assert ApiToken.objects.get(pk=alices.pk).revoked is None


def test_password_reset_is_offered_only_with_email(client: Any, settings: Any) -> None:
    settings.PASSWORD_RESET_ENABLED = False
    assert client.get("/accounts/password_reset/").status_code == 404
    settings.PASSWORD_RESET_ENABLED = True
    assert client.get("/accounts/password_reset/").status_code == 200


def test_sso_urls_answer_404_unless_configured(client: Any, settings: Any) -> None:
    settings.OIDC_ENABLED = False
    assert client.get("/oidc/authenticate/").status_code == 404


def test_repeated_failed_logins_lock_the_account_out(make_user: Any, client: Any, settings: Any) -> None:
    make_user("vera", "viewer")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/accounts/login/", {"username": "vera", "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    response = client.post("/accounts/login/", {"username": "vera", "password": "wrong"})
    assert response.status_code == 429
    response = client.post("/accounts/login/", {"username": "vera", "password": "vera-password-123"})
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    # Another user from the same address is not locked out.
    make_user("other", "viewer")
    response = client.post("/accounts/login/", {"username": "other", "password": "other-password-123"})
    assert response.status_code == 302


def test_signing_in_lands_on_the_overview_or_where_the_user_was_going(make_user: Any, client: Any) -> None:
    make_user("vera", "viewer")
    response = client.post("/accounts/login/", {"username": "vera", "password": "vera-password-123"})
    assert response.status_code == 302 and response["Location"] == "/"
    client.logout()
    response = client.post(
        "/accounts/login/?next=/clusters/", {"username": "vera", "password": "vera-password-123", "next": "/clusters/"}
    )
    assert response.status_code == 302 and response["Location"] == "/clusters/"
