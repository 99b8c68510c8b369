"""The single sign-on backend and middleware without a provider: who a set of claims signs in as (keyed
by issuer and sub, never by name or email), the names new SSO users get, the checks on the ID token,
and the session refresh middleware's URLs."""

from __future__ import annotations

import importlib
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.models import Group
from django.contrib.sessions.backends.db import SessionStore
from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import NoReverseMatch
from mozilla_django_oidc.middleware import SessionRefresh

from access import oidc, roles
from access.models import OidcIdentity, Scope

ISSUER = "https://id.example.com/realms/dash"
OTHER_ISSUER = "https://login.example.org"
CLIENT_ID = "liqo-dash"
BACKEND = "access.oidc.RoleMappingOIDCBackend"


@pytest.fixture
def sso_settings(settings: Any) -> Any:
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_OP_ISSUER = ISSUER
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = "https://id.example.com/realms/dash/protocol/openid-connect/auth"
    settings.OIDC_ROLE_GROUPS = "admin=dash-admins,operator=dash-operators,viewer=dash-viewers"
    return settings


def sign_in(claims: dict[str, Any], issuer: str = ISSUER, **token: Any) -> Any:
    """What the backend makes of an ID token from ``issuer`` and these userinfo claims."""
    backend = oidc.RoleMappingOIDCBackend()
    payload = {"iss": issuer, "sub": claims["sub"], "aud": CLIENT_ID, **token}
    backend.get_userinfo = lambda access_token, id_token, payload: dict(claims)  # type: ignore[method-assign]
    return backend.get_or_create_user("access-token", "id-token", payload)


# --- Names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"sub": "s1", "preferred_username": "olga", "email": "o@example.com"}, "olga"),
        ({"sub": "s1", "email": "olga.k@example.com"}, "olga.k"),
        ({"sub": "3f2c-99"}, "3f2c-99"),
        ({"sub": "s1", "preferred_username": "Olga Kühn/ops"}, "Olga_Kühn_ops"),
        ({"sub": "s1", "preferred_username": "  ", "email": ""}, "s1"),
        ({"sub": "s1", "preferred_username": "x" * 400}, "x" * 142),
        ({"sub": "///"}, "sso-user"),
    ],
)
def test_the_username_comes_from_the_claims(claims: dict[str, Any], expected: str) -> None:
    assert oidc.base_username(claims) == expected


def test_a_taken_name_gets_a_number() -> None:
    taken = {"admin", "admin-2", "bob"}
    assert oidc.free_username("alice", taken.__contains__) == "alice"
    assert oidc.free_username("bob", taken.__contains__) == "bob-2"
    assert oidc.free_username("admin", taken.__contains__) == "admin-3"


# --- Who signs in -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_provider_admin_gets_a_new_user_not_the_local_superuser(sso_settings: Any, admin_user: Any) -> None:
    password_hash = admin_user.password
    user = sign_in({"sub": "mallory", "preferred_username": "admin", "email": admin_user.email, "groups": []})
    assert user.pk != admin_user.pk
    assert user.username == "admin-2"
    assert not (user.is_superuser or user.is_staff or user.has_usable_password())
    admin_user.refresh_from_db()
    assert admin_user.is_superuser and admin_user.password == password_hash
    assert not OidcIdentity.objects.filter(user=admin_user).exists()
    assert roles.role_of(user) is None


@pytest.mark.django_db
def test_names_collide_in_any_letter_case_and_with_local_users(sso_settings: Any, django_user_model: Any) -> None:
    django_user_model.objects.create_user("Olga", password="local-password-123")
    first = sign_in({"sub": "a", "preferred_username": "olga"})
    second = sign_in({"sub": "b", "preferred_username": "olga"})
    assert (first.username, second.username) == ("olga-2", "olga-3")


@pytest.mark.django_db
def test_users_are_keyed_by_issuer_and_sub(sso_settings: Any, django_user_model: Any) -> None:
    first = sign_in({"sub": "s-1", "preferred_username": "sam", "email": "sam@a.example"})
    # Same issuer and sub, new name and email at the provider: the same user, the name kept.
    again = sign_in({"sub": "s-1", "preferred_username": "samuel", "email": "samuel@a.example"})
    assert again.pk == first.pk and again.username == "sam" and again.email == "samuel@a.example"
    # Another account at the same issuer that now calls itself "sam": another user.
    other = sign_in({"sub": "s-2", "preferred_username": "sam"})
    assert other.pk != first.pk and other.username == "sam-2"
    # The same sub at another issuer: another user.
    sso_settings.OIDC_OP_ISSUER = OTHER_ISSUER
    elsewhere = sign_in({"sub": "s-1", "preferred_username": "sam"}, issuer=OTHER_ISSUER)
    assert elsewhere.pk not in (first.pk, other.pk) and elsewhere.username == "sam-3"
    assert set(OidcIdentity.objects.values_list("issuer", "subject")) == {
        (ISSUER, "s-1"),
        (ISSUER, "s-2"),
        (OTHER_ISSUER, "s-1"),
    }


@pytest.mark.django_db
def test_an_identity_whose_user_became_staff_or_got_a_password_is_refused(sso_settings: Any) -> None:
    user = sign_in({"sub": "s-1", "preferred_username": "olga"})
    backend = oidc.RoleMappingOIDCBackend()
    assert backend.get_user(user.pk) == user
    for change in ("is_superuser", "is_staff", "password"):
        if change == "password":
            user.set_password("now-a-local-password-123")
        else:
            setattr(user, change, True)
        user.save()
        with pytest.raises(SuspiciousOperation):
            sign_in({"sub": "s-1", "preferred_username": "olga"})
        assert backend.get_user(user.pk) is None  # an open SSO session ends too
        user.is_superuser = user.is_staff = False
        user.set_unusable_password()
        user.save()


@pytest.mark.django_db
def test_a_local_user_is_never_an_sso_session_user(sso_settings: Any, admin_user: Any, django_user_model: Any) -> None:
    local = django_user_model.objects.create_user("plain")
    local.set_unusable_password()
    local.save()
    backend = oidc.RoleMappingOIDCBackend()
    assert backend.get_user(admin_user.pk) is None
    assert backend.get_user(local.pk) is None  # no identity
    assert not backend.filter_users_by_claims({"sub": "x", "preferred_username": "admin", "email": admin_user.email})


@pytest.mark.django_db
def test_refusals_through_authenticate_sign_in_nobody(sso_settings: Any, admin_user: Any, rf: RequestFactory) -> None:
    """The library turns the backend's SuspiciousOperation into a failed sign-in, not an error page."""
    backend = oidc.RoleMappingOIDCBackend()
    request = rf.get("/oidc/callback/", {"code": "c", "state": "s"})
    request.session = SessionStore()
    backend.get_token = lambda payload: {"id_token": "id", "access_token": "at"}  # type: ignore[method-assign]
    backend.verify_token = lambda token, **kwargs: {"iss": OTHER_ISSUER, "sub": "x", "aud": CLIENT_ID}  # type: ignore[method-assign]
    backend.get_userinfo = lambda *args: {"sub": "x", "preferred_username": "admin"}  # type: ignore[method-assign]
    assert backend.authenticate(request, nonce="n") is None
    assert not OidcIdentity.objects.exists()


@pytest.mark.django_db
def test_only_the_callback_authenticates_with_sso(sso_settings: Any, rf: RequestFactory) -> None:
    backend = oidc.RoleMappingOIDCBackend()
    backend.get_token = lambda payload: pytest.fail("no token request")  # type: ignore[method-assign]
    request = rf.post("/accounts/login/?code=c&state=s", {"username": "admin", "password": "x"})
    request.session = SessionStore()
    assert backend.authenticate(request, username="admin", password="x") is None
    assert backend.authenticate(None) is None


# --- Checks on the tokens ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_issuer_must_be_the_configured_one(sso_settings: Any) -> None:
    with pytest.raises(SuspiciousOperation, match="OIDC_OP_ISSUER"):
        sign_in({"sub": "s-1"}, issuer=OTHER_ISSUER)
    with pytest.raises(SuspiciousOperation):
        sign_in({"sub": "s-1"}, issuer=ISSUER + "/")
    assert not OidcIdentity.objects.exists()


@pytest.mark.django_db
def test_without_oidc_op_issuer_the_issuer_must_share_the_authorization_endpoints_origin(sso_settings: Any) -> None:
    sso_settings.OIDC_OP_ISSUER = ""
    user = sign_in({"sub": "s-1", "preferred_username": "olga"}, issuer=ISSUER)
    assert OidcIdentity.objects.get(user=user).issuer == ISSUER  # keyed by the token's iss
    for wrong in (
        OTHER_ISSUER,
        "http://id.example.com/realms/dash",
        "https://id.example.com:8443",
        "",
        "id.example.com",
    ):
        with pytest.raises(SuspiciousOperation):
            sign_in({"sub": "s-2"}, issuer=wrong)
    assert OidcIdentity.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "token",
    [{"aud": "another-client"}, {"aud": ["another-client"]}, {"aud": [CLIENT_ID, "x"], "azp": "x"}, {"sub": ""}],
)
def test_a_token_for_another_client_or_without_sub_is_refused(sso_settings: Any, token: dict[str, Any]) -> None:
    with pytest.raises(SuspiciousOperation):
        sign_in({"sub": "s-1"}, **token)


@pytest.mark.django_db
def test_the_userinfo_must_be_about_the_id_tokens_sub(sso_settings: Any) -> None:
    backend = oidc.RoleMappingOIDCBackend()
    backend.get_userinfo = lambda *args: {"sub": "someone-else", "preferred_username": "olga"}  # type: ignore[method-assign]
    with pytest.raises(SuspiciousOperation, match="userinfo"):
        backend.get_or_create_user("at", "id", {"iss": ISSUER, "sub": "s-1", "aud": CLIENT_ID})


@pytest.mark.django_db
def test_without_a_userinfo_endpoint_the_id_token_claims_are_used(sso_settings: Any) -> None:
    sso_settings.OIDC_OP_USER_ENDPOINT = ""
    backend = oidc.RoleMappingOIDCBackend()
    payload = {"iss": ISSUER, "sub": "s-1", "aud": CLIENT_ID, "preferred_username": "ida", "groups": ["dash-viewers"]}
    user = backend.get_or_create_user("at", "id", payload)
    assert user.username == "ida" and roles.role_of(user) == "viewer"


# --- Roles from the groups claim -----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_groups_claim_sets_role_and_scope_groups_at_every_sign_in(sso_settings: Any) -> None:
    team_a = Group.objects.create(name="team-a")
    Scope.objects.create(group=team_a, kind="glob", value="team-a-*")
    claims = {"sub": "s-1", "preferred_username": "olga", "groups": ["dash-operators", "team-a", "admin", "x"]}
    user = sign_in(claims)
    assert sorted(user.groups.values_list("name", flat=True)) == ["operator", "team-a"]  # "admin" is no role
    user = sign_in({**claims, "groups": ["dash-viewers", "dash-admins"]})
    assert sorted(user.groups.values_list("name", flat=True)) == ["admin"]
    user = sign_in({**claims, "groups": []})
    assert not user.groups.exists() and roles.role_of(user) is None


def test_oidc_role_groups_has_the_documented_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from access import conf

    monkeypatch.delenv("OIDC_ROLE_GROUPS", raising=False)
    try:
        assert (
            importlib.reload(conf).OIDC_ROLE_GROUPS == "admin=dash-admins,operator=dash-operators,viewer=dash-viewers"
        )
    finally:
        monkeypatch.undo()
        importlib.reload(conf)


# --- Session refresh ------------------------------------------------------------------------------------


def test_sso_installs_the_namespaced_session_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    from access import conf

    stock = ["django.contrib.auth.middleware.AuthenticationMiddleware"]
    monkeypatch.setattr(conf, "OIDC_ENABLED", True)
    assert conf.middleware(stock)[1:3] == ["access.oidc.OidcSessionRefresh", "access.middleware.AccessMiddleware"]
    assert "mozilla_django_oidc.middleware.SessionRefresh" not in conf.middleware(stock)
    monkeypatch.setattr(conf, "OIDC_ENABLED", False)
    assert not [m for m in conf.middleware(stock) if "SessionRefresh" in m]


def _request(rf: RequestFactory, user: Any, path: str, backend: str = BACKEND, **headers: str) -> Any:
    request = rf.get(path, headers=headers)
    request.user = user
    request.session = SessionStore()
    request.session[BACKEND_SESSION_KEY] = backend
    request.session["oidc_id_token_expiration"] = time.time() - 1
    return request


@pytest.mark.django_db
def test_the_stock_session_refresh_cannot_find_the_namespaced_urls(sso_settings: Any) -> None:
    """Why the subclass exists: the library's middleware reverses global names."""
    with pytest.raises(NoReverseMatch):
        _ = SessionRefresh(lambda request: HttpResponse()).exempt_urls


@pytest.mark.django_db
def test_an_expired_sso_session_is_sent_to_the_provider_silently(
    sso_settings: Any, rf: RequestFactory, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_user("olga")
    middleware = oidc.OidcSessionRefresh(lambda request: HttpResponse())
    assert middleware.exempt_urls == {"/oidc/authenticate/", "/oidc/callback/", "/oidc/logout/"}

    response = middleware.process_request(_request(rf, user, "/namespaces/?q=a"))
    assert response is not None and response.status_code == 302
    location = urlsplit(response["Location"])
    assert response["Location"].startswith(sso_settings.OIDC_OP_AUTHORIZATION_ENDPOINT + "?")
    query = parse_qs(location.query)
    assert query["prompt"] == ["none"] and query["redirect_uri"] == ["http://testserver/oidc/callback/"]
    assert query["code_challenge_method"] == ["S256"]  # OIDC_USE_PKCE defaults to on

    for path, headers in [
        ("/oidc/callback/", {}),
        ("/api/v1/clusters/", {}),
        ("/healthz", {}),
        ("/static/app.css", {}),
        ("/namespaces/rows/", {"HX-Request": "true"}),
    ]:
        assert middleware.process_request(_request(rf, user, path, **headers)) is None, path
    local = _request(rf, user, "/namespaces/", backend="django.contrib.auth.backends.ModelBackend")
    assert middleware.process_request(local) is None
