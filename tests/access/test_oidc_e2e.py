"""Single sign-on end to end: a real OpenID provider (django-oauth-toolkit, tests/oidc_provider/) in its
own process; the dashboard redirects to it, the user signs in there, and the dashboard exchanges the
code over HTTP, checks the ID token's signature with the provider's JWKS, reads the userinfo, and maps
the groups claim to a role and to the Django groups that carry scopes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import Group

from access import roles
from access.models import Scope
from tests.conftest import ROOT, free_port, wait_until

CLIENT_ID = "liqo-dash-test"
CLIENT_SECRET = "liqo-dash-test-secret-0123456789"
REDIRECT_URI = "http://testserver/oidc/callback/"


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def oidc_provider(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    log = open(tmp_path / "provider.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "tests.oidc_provider.serve", "--port", str(port), "--data", str(tmp_path / "op"),
            "--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET, "--redirect-uri", REDIRECT_URI,
            "--user", "olga:olga-pass-123:olga@example.com:dash-operators,team-a,unrelated",
            "--user", "vera:vera-pass-123:vera@example.com:nothing-mapped",
        ],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: proc.poll() is not None or _answers(f"{base}/o/.well-known/openid-configuration"),
            60,
            message="the OpenID provider",
        )
        assert proc.poll() is None, (tmp_path / "provider.log").read_text()
        yield base
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture
def sso(settings: Any, oidc_provider: str) -> str:
    settings.OIDC_ENABLED = True
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "access.oidc.RoleMappingOIDCBackend"]
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{oidc_provider}/o/authorize/"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{oidc_provider}/o/token/"
    settings.OIDC_OP_USER_ENDPOINT = f"{oidc_provider}/o/userinfo/"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{oidc_provider}/o/.well-known/jwks.json"
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    settings.OIDC_USE_PKCE = True
    settings.OIDC_ROLE_GROUPS = "admin=dash-admins,operator=dash-operators,viewer=dash-viewers"
    settings.LOGIN_REDIRECT_URL = "/namespaces/"
    return oidc_provider


def sign_in(client: Any, provider: str, username: str, password: str) -> Any:
    """The browser's part: start at the dashboard, sign in at the provider, come back with the code."""
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302
    authorize = start["Location"]
    assert authorize.startswith(f"{provider}/o/authorize/")
    browser = requests.Session()
    to_login = browser.get(authorize, allow_redirects=False, timeout=10)
    assert to_login.status_code == 302 and "/accounts/login/" in to_login.headers["Location"]
    login_url = provider + to_login.headers["Location"]
    form = browser.get(login_url, timeout=10)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert csrf is not None
    next_url = parse_qs(urlsplit(login_url).query)["next"][0]
    signed_in = browser.post(
        login_url,
        data={"username": username, "password": password, "csrfmiddlewaretoken": csrf.group(1), "next": next_url},
        allow_redirects=False,
        timeout=10,
    )
    assert signed_in.status_code == 302, signed_in.text[:500]
    back = browser.get(provider + signed_in.headers["Location"], allow_redirects=False, timeout=10)
    assert back.status_code == 302
    callback = urlsplit(back.headers["Location"])
    assert f"{callback.scheme}://{callback.netloc}{callback.path}" == REDIRECT_URI
    return client.get(f"{callback.path}?{callback.query}")


@pytest.mark.django_db
def test_sso_maps_the_groups_claim_to_the_role_and_the_scope_groups(
    sso: str, client: Any, django_user_model: Any
) -> None:
    team_a = Group.objects.create(name="team-a")
    Scope.objects.create(group=team_a, kind="glob", value="team-a-*")
    response = sign_in(client, sso, "olga", "olga-pass-123")
    assert response.status_code == 302
    assert response["Location"] == "/namespaces/"
    user = django_user_model.objects.get(username="olga")
    assert user.email == "olga@example.com"
    assert sorted(user.groups.values_list("name", flat=True)) == ["operator", "team-a"]
    assert roles.role_of(user) == "operator"
    assert [str(s) for s in roles.scopes_of(user)] == ["team-a-*"]
    page = client.get("/namespaces/")
    assert page.status_code == 200
    assert page.context["access_role"] == "operator" and page.context["access_scopes"] == "team-a-*"


@pytest.mark.django_db
def test_sso_user_without_a_mapped_group_gets_no_role(sso: str, client: Any, django_user_model: Any) -> None:
    response = sign_in(client, sso, "vera", "vera-pass-123")
    assert response.status_code == 302
    user = django_user_model.objects.get(username="vera")
    assert roles.role_of(user) is None
    page = client.get("/namespaces/")
    assert page.status_code == 403 and "Your account has no role" in page.content.decode()
