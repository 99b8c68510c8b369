"""API authentication and authorization: 401 / 403 / 429 bodies and headers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from access.models import ApiToken
from access.throttles import AnonymousThrottle, TokenFailureThrottle, TokenRateThrottle

pytestmark = pytest.mark.django_db

URL = "/api/v1/namespaces/"


def bearer(text: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {text}")
    return client


def assert_status(response: Any, code: int, message: str) -> None:
    """The API's errors are Kubernetes-style Status bodies (offloading.api.errors)."""
    body = response.json()
    assert body["kind"] == "Status" and body["code"] == code == response.status_code, body
    assert body["message"] == message, body


def assert_401(response: Any, detail: str) -> None:
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="liqo-dash"'
    assert response["Content-Type"] == "application/json"
    assert_status(response, 401, detail)


def test_no_credentials_is_401_with_www_authenticate() -> None:
    response = APIClient().get(URL)
    assert_401(response, "Authentication credentials were not provided.")


@pytest.mark.parametrize("text", ["nonsense", "ldt_000000000000_secret", "ldt_short_x"])
def test_a_bad_token_is_401(text: str) -> None:
    assert_401(bearer(text).get(URL), "invalid token")


def test_a_valid_token_acts_as_its_user_and_records_its_use(make_user: Any) -> None:
    user = make_user("vera", "viewer")
    row, text = ApiToken.issue(user, "ci")
    assert row.last_used is None
    assert bearer(text).get(URL).status_code == 200
    first = ApiToken.objects.get(pk=row.pk).last_used
    assert first is not None and timezone.now() - first < timedelta(seconds=10)
    # Used again within a minute: not written again.
    recent = timezone.now() - timedelta(seconds=30)
    ApiToken.objects.filter(pk=row.pk).update(last_used=recent)
    assert bearer(text).get(URL).status_code == 200
    assert ApiToken.objects.get(pk=row.pk).last_used == recent
    # More than a minute later: written.
    old = timezone.now() - timedelta(minutes=2)
    ApiToken.objects.filter(pk=row.pk).update(last_used=old)
    assert bearer(text).get(URL).status_code == 200
    assert ApiToken.objects.get(pk=row.pk).last_used > old + timedelta(minutes=1)


def test_expired_revoked_and_inactive_are_401(make_user: Any) -> None:
    user = make_user("vera", "viewer")
    expired, expired_text = ApiToken.issue(user, "old", 1)
    ApiToken.objects.filter(pk=expired.pk).update(expires=timezone.now() - timedelta(seconds=1))
    assert_401(bearer(expired_text).get(URL), "token expired")
    revoked, revoked_text = ApiToken.issue(user, "gone")
    revoked.revoke()
    assert_401(bearer(revoked_text).get(URL), "token revoked")
    _row, text = ApiToken.issue(user, "live")
    user.is_active = False
    user.save()
    assert_401(bearer(text).get(URL), "user inactive or deleted")


def test_the_token_keyword_takes_our_tokens_and_drf_authtoken_keys(make_user: Any) -> None:
    user = make_user("vera", "viewer")
    _row, text = ApiToken.issue(user, "ci")
    for credential in (text, Token.objects.create(user=user).key):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {credential}")
        assert client.get(URL).status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef0123456789abcdef01234567")
    assert_401(client.get(URL), "Invalid token.")


def test_authenticated_without_the_role_is_403_json(make_user: Any) -> None:
    _row, nobody_text = ApiToken.issue(make_user("nobody"), "x")
    response = bearer(nobody_text).get(URL)
    assert response.status_code == 403
    assert_status(response, response.status_code, "your account has no role: ask an admin to grant you one")
    _row, viewer_text = ApiToken.issue(make_user("vera", "viewer"), "x")
    response = bearer(viewer_text).delete("/api/v1/namespaces/alpha/offloading/")
    assert response.status_code == 403
    assert_status(response, response.status_code, "your role (viewer) may not do this: it needs the operator role")


def test_a_session_user_without_a_role_gets_403_json_from_the_api(make_user: Any, client: Any) -> None:
    client.force_login(make_user("nobody"))
    response = client.get(URL)
    assert response.status_code == 403
    assert_status(response, response.status_code, "your account has no role: ask an admin to grant you one")


def assert_429(response: Any) -> None:
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert response["Content-Type"] == "application/json"
    assert response.json()["message"].startswith(("Request was throttled", "too many failed token attempts"))


def test_failed_token_attempts_are_throttled_per_address(make_user: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(TokenFailureThrottle, "THROTTLE_RATES", {"token_failures": "3/minute"})
    _row, good = ApiToken.issue(make_user("vera", "viewer"), "ci")
    for _ in range(3):
        assert bearer("ldt_000000000000_guess").get(URL).status_code == 401
    assert_429(bearer("ldt_000000000000_guess").get(URL))
    assert_429(bearer("nonsense").get(URL))  # any token that names no existing one: the same bucket
    # Someone else's guesses do not lock out a valid token at the same address (a shared NAT).
    assert bearer(good).get(URL).status_code == 200
    assert bearer("ldt_000000000000_guess").get(URL, REMOTE_ADDR="10.0.0.9").status_code == 401


def test_guessing_one_tokens_secret_is_throttled_without_telling_right_from_wrong(
    make_user: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(TokenFailureThrottle, "THROTTLE_RATES", {"token_failures": "3/minute"})
    row, good = ApiToken.issue(make_user("vera", "viewer"), "ci")
    _other_row, other = ApiToken.issue(make_user("olga", "viewer"), "ci")
    wrong = f"ldt_{row.prefix}_wrong-secret"
    for _ in range(3):
        assert_401(bearer(wrong).get(URL), "invalid token")
    # Blocked for this token at this address: right and wrong answer alike.
    assert_429(bearer(wrong).get(URL))
    assert_429(bearer(good).get(URL))
    # Other tokens at this address, and this token at other addresses, are not affected.
    assert bearer(other).get(URL).status_code == 200
    assert bearer(good).get(URL, REMOTE_ADDR="10.0.0.9").status_code == 200


def test_anonymous_requests_are_throttled(monkeypatch: Any) -> None:
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", {"anon": "2/minute"})
    assert APIClient().get(URL).status_code == 401
    assert APIClient().get(URL).status_code == 401
    assert_429(APIClient().get(URL))


def test_token_requests_are_throttled_per_user_and_sessions_are_not(
    make_user: Any, monkeypatch: Any, client: Any
) -> None:
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"token": "2/minute"})
    user = make_user("vera", "viewer")
    _row, text = ApiToken.issue(user, "ci")
    assert bearer(text).get(URL).status_code == 200
    assert bearer(text).get(URL).status_code == 200
    assert_429(bearer(text).get(URL))
    client.force_login(user)
    assert all(client.get(URL).status_code == 200 for _ in range(3))
