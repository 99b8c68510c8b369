"""Single sign-on end to end, against an independent OpenID provider.

The provider is the npm package oidc-provider (tests/oidc_provider/provider.mjs), a Node process of its
own; the dashboard is its production web process (gunicorn with deploy/gunicorn.conf.py) started with
the OIDC_* variables in its environment, as a deployment configures it, on the test database; Chromium
(Playwright) is the user: it clicks "Sign in with single sign-on", signs in on the provider's own form
and comes back. Nothing is overridden in the dashboard's settings at run time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.conf import settings as django_settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher, make_password
from django.contrib.auth.models import Group
from django.db import connections

from access import roles
from access.models import ApiToken, OidcIdentity, Scope
from tests.fixtures.celery import database_url
from tests.fixtures.personas import ADMIN_PASSWORD
from tests.fixtures.waits import ROOT, free_port, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NODE = shutil.which("node") or "node"
PROVIDER_SCRIPT = ROOT / "tests" / "oidc_provider" / "provider.mjs"
CLIENT_ID = "liqo-dash-test"
CLIENT_SECRET = "liqo-dash-test-secret-0123456789"
TIMEOUT_MS = 20_000

# Provider A's accounts. "mallory" calls herself admin and claims the local admin's email address.
OLGA = {
    "sub": "0001-olga",
    "preferred_username": "olga",
    "email": "olga@example.com",
    "groups": ["dash-operators", "team-a", "unrelated"],
}
VERA = {"sub": "0002-vera", "preferred_username": "vera", "email": "vera@example.com", "groups": []}
MALLORY = {
    "sub": "0003-mallory",
    "preferred_username": "admin",
    "email": "admin@example.com",
    "groups": ["dash-viewers"],
}
SAM_A = {"sub": "0004-shared", "preferred_username": "sam", "email": "sam@a.example", "groups": ["dash-viewers"]}
# Provider B (another issuer) has an account with the same sub.
SAM_B = {"sub": "0004-shared", "preferred_username": "sam", "email": "sam@b.example", "groups": ["dash-operators"]}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1, allow_redirects=False).status_code == 200
    except requests.RequestException:
        return False


@dataclass
class Provider:
    issuer: str
    log: Path
    proc: subprocess.Popen[bytes] = field(repr=False)

    @property
    def port(self) -> int:
        return int(self.issuer.rsplit(":", 1)[1])


@dataclass
class Dashboard:
    url: str
    log: Path
    env: dict[str, str] = field(repr=False)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def server_errors(self) -> list[str]:
        """Access-log lines of 5xx answers, and tracebacks."""
        lines = self.log_text().splitlines()
        return [line for line in lines if re.search(r'" 5\d\d ', line) or "Traceback" in line]


class Stack:
    """OpenID providers and dashboard web processes for one test; everything is stopped at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Any] = []
        self.dashboards: list[Dashboard] = []

    def _popen(self, args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.logs.append(out)
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def provider(
        self, name: str, accounts: list[dict[str, Any]], redirect_uris: list[str], port: int | None = None
    ) -> Provider:
        assert (ROOT / "node_modules" / "oidc-provider").exists(), (
            "run `npm ci` (package-lock.json) to get oidc-provider"
        )
        port = port or free_port()
        accounts_file = self.tmp_path / f"{name}-accounts.json"
        accounts_file.write_text(json.dumps(accounts))
        log = self.tmp_path / f"{name}.log"
        args = [
            NODE,
            str(PROVIDER_SCRIPT),
            "--port",
            str(port),
            "--client-id",
            CLIENT_ID,
            "--client-secret",
            CLIENT_SECRET,
            "--accounts",
            str(accounts_file),
        ]
        for uri in redirect_uris:
            args += ["--redirect-uri", uri]
        proc = self._popen(args, log, {**os.environ})
        issuer = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: proc.poll() is not None or _answers(f"{issuer}/.well-known/openid-configuration"),
            30,
            message=f"OpenID provider {name}",
        )
        assert proc.poll() is None, log.read_text()
        return Provider(issuer, log, proc)

    def dashboard(self, name: str, port: int, provider: Provider, **extra: str) -> Dashboard:
        """The dashboard's web process, configured for ``provider`` by its environment only."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("OIDC_")}
        env = {
            **base,
            "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
            "DATABASE_URL": database_url(),
            "LIQO_DASH_VAR_DIR": str(django_settings.VAR_DIR),
            "LIQO_DASH_LOCAL_CACHE": "true",
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "INSECURE_HTTP": "true",
            "PYTHONUNBUFFERED": "1",
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{provider.issuer}/auth",
            "OIDC_OP_TOKEN_ENDPOINT": f"{provider.issuer}/token",
            "OIDC_OP_USER_ENDPOINT": f"{provider.issuer}/me",
            "OIDC_OP_JWKS_ENDPOINT": f"{provider.issuer}/jwks",
            "OIDC_RP_SCOPES": "openid email profile groups",
            # OIDC_ROLE_GROUPS is left to its default (admin=dash-admins,operator=dash-operators,...).
            **extra,
        }
        log = self.tmp_path / f"{name}.log"
        proc = self._popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "liqo_dash.wsgi",
                "-c",
                "deploy/gunicorn.conf.py",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
                "--threads",
                "4",
                "--access-logfile",
                "-",
            ],
            log,
            env,
        )
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: proc.poll() is not None or _answers(f"{url}/healthz"), 60, message=f"dashboard {name}")
        assert proc.poll() is None, log.read_text()
        dashboard = Dashboard(url, log, env)
        self.dashboards.append(dashboard)
        return dashboard

    def stop(self) -> None:
        for proc in self.procs:
            _stop(proc)
        for out in self.logs:
            out.close()


@pytest.fixture
def stack(transactional_db: Any, tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    try:
        yield s
        for dashboard in s.dashboards:
            assert not dashboard.server_errors(), dashboard.log_text()
    finally:
        s.stop()


def callback(port: int) -> str:
    return f"http://127.0.0.1:{port}/oidc/callback/"


@pytest.fixture
def sso(stack: Stack) -> tuple[Provider, Dashboard]:
    """Provider A and a dashboard configured for it (with OIDC_OP_ISSUER)."""
    port = free_port()
    provider = stack.provider("provider-a", [OLGA, VERA, MALLORY, SAM_A], [callback(port)])
    return provider, stack.dashboard("dashboard-a", port, provider, OIDC_OP_ISSUER=provider.issuer)


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """The session's Chromium (tests/fixtures/browser.py), with this module's longer waits."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    try:
        yield chromium
    finally:
        # The test's ORM calls ran beside Playwright's loop, on a connection of that context.
        connections.close_all()


def new_page(browser: Any) -> Any:
    """A browser of its own (own cookies) for one person."""
    page = browser.new_context().new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def sso_sign_in(page: Any, dashboard: Dashboard, provider: Provider, sub: str) -> None:
    """From the dashboard's login page through the provider's sign-in form and back."""
    page.goto(f"{dashboard.url}/accounts/login/")
    page.get_by_role("button", name="Sign in with single sign-on").click()
    page.wait_for_url(re.compile(re.escape(f"{provider.issuer}/interaction/")))
    page.fill("input[name=login]", sub)
    page.fill("input[name=password]", "not-checked-by-the-dev-form")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(dashboard.url) + "/"))
    assert page.url.startswith(dashboard.url + "/"), page.url
    assert "/accounts/login/" not in page.url, f"SSO sign-in failed:\n{dashboard.log_text()}"


def user_menu(page: Any) -> str:
    return str(page.locator("details.user-menu summary").inner_text())


def log_out(page: Any) -> None:
    page.locator("details.user-menu summary").click()
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r".*/accounts/login/"))


def test_groups_claim_gives_the_role_and_the_scope_groups(
    sso: tuple[Provider, Dashboard], browser: Any, django_user_model: Any
) -> None:
    provider, dashboard = sso
    team_a = Group.objects.create(name="team-a")
    Scope.objects.create(group=team_a, kind="glob", value="team-a-*")
    page = new_page(browser)
    sso_sign_in(page, dashboard, provider, OLGA["sub"])

    user = django_user_model.objects.get(oidc_identity__issuer=provider.issuer, oidc_identity__subject=OLGA["sub"])
    assert user.username == "olga" and user.email == "olga@example.com"
    assert sorted(user.groups.values_list("name", flat=True)) == ["operator", "team-a"]
    assert roles.role_of(user) == "operator"
    assert [str(s) for s in roles.scopes_of(user)] == ["team-a-*"]
    assert not (user.has_usable_password() or user.is_staff or user.is_superuser)

    # Pages answer (SessionRefresh is installed, as OIDC_* is set at start: no NoReverseMatch 500).
    for path in ("/", "/namespaces/", "/tokens/"):
        response = page.goto(f"{dashboard.url}{path}")
        assert response.status == 200, (path, response.status)
    assert "olga" in user_menu(page) and "operator" in user_menu(page)


def test_a_user_without_groups_signs_in_without_a_role(
    sso: tuple[Provider, Dashboard], browser: Any, django_user_model: Any
) -> None:
    provider, dashboard = sso
    page = new_page(browser)
    sso_sign_in(page, dashboard, provider, VERA["sub"])
    user = django_user_model.objects.get(username="vera")
    assert roles.role_of(user) is None and not user.groups.exists()
    response = page.goto(f"{dashboard.url}/namespaces/")
    assert response.status == 403
    assert "Your account has no role" in page.content()
    api = page.request.get(f"{dashboard.url}/api/v1/clusters/")
    assert api.status == 403


def test_a_provider_admin_does_not_take_over_the_local_admin(
    sso: tuple[Provider, Dashboard], browser: Any, admin_user: Any, django_user_model: Any
) -> None:
    provider, dashboard = sso
    # A hash the dashboard process can check (the test settings hash with MD5, for speed).
    admin_user.password = make_password(ADMIN_PASSWORD, hasher=PBKDF2PasswordHasher())
    admin_user.save(update_fields=["password"])
    password_hash = admin_user.password
    page = new_page(browser)
    sso_sign_in(page, dashboard, provider, MALLORY["sub"])

    admin_user.refresh_from_db()
    assert admin_user.is_superuser and admin_user.is_active and admin_user.password == password_hash
    assert not OidcIdentity.objects.filter(user=admin_user).exists()
    mallory = django_user_model.objects.get(oidc_identity__subject=MALLORY["sub"])
    assert mallory.pk != admin_user.pk and mallory.username == "admin-2"
    assert not (mallory.is_superuser or mallory.is_staff or mallory.has_usable_password())
    assert roles.role_of(mallory) == "viewer"
    page.goto(f"{dashboard.url}/namespaces/")
    assert user_menu(page).split()[:2] == ["admin-2", "viewer"]

    # Django's admin site: not for her.
    for path in ("/admin/", "/admin/auth/user/"):
        response = page.goto(f"{dashboard.url}{path}")
        assert response.status == 403, (path, response.status)  # offloading.views.admingate
        assert "Site administration" not in page.content()

    # A token acts as her, a viewer: reads, but no writes and no admin-only export.
    page.goto(f"{dashboard.url}/tokens/")
    page.fill("input[name=name]", "mallory-ci")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#token-value").inner_text().strip()
    assert ApiToken.objects.get(name="mallory-ci").user_id == mallory.pk
    bearer = {"Authorization": f"Bearer {token}"}
    assert requests.get(f"{dashboard.url}/api/v1/clusters/", headers=bearer, timeout=10).status_code == 200
    export = requests.get(f"{dashboard.url}/api/v1/audit/export/?format=json", headers=bearer, timeout=10)
    assert export.status_code == 403
    write = requests.post(f"{dashboard.url}/api/v1/changes/", json={}, headers=bearer, timeout=10)
    assert write.status_code == 403

    # The local admin still signs in with the password, as herself.
    local = new_page(browser)
    local.goto(f"{dashboard.url}/accounts/login/")
    local.fill("input[name=username]", "admin")
    local.fill("input[name=password]", ADMIN_PASSWORD)
    local.click("main button[type=submit]")
    local.wait_for_url(f"{dashboard.url}/")
    assert user_menu(local).split()[:2] == ["admin", "admin"]


def test_the_same_sub_at_another_issuer_is_another_user(stack: Stack, browser: Any, django_user_model: Any) -> None:
    port_a, port_b = free_port(), free_port()
    provider_a = stack.provider("provider-a", [SAM_A], [callback(port_a)])
    provider_b = stack.provider("provider-b", [SAM_B], [callback(port_b)])
    dashboard_a = stack.dashboard("dashboard-a", port_a, provider_a, OIDC_OP_ISSUER=provider_a.issuer)
    # Without OIDC_OP_ISSUER: the ID token's iss (on the authorization endpoint's origin) is the key.
    dashboard_b = stack.dashboard("dashboard-b", port_b, provider_b)

    sso_sign_in(new_page(browser), dashboard_a, provider_a, SAM_A["sub"])
    sso_sign_in(new_page(browser), dashboard_b, provider_b, SAM_B["sub"])

    identities = {i.issuer: i.user for i in OidcIdentity.objects.select_related("user")}
    assert set(identities) == {provider_a.issuer, provider_b.issuer}
    sam_a, sam_b = identities[provider_a.issuer], identities[provider_b.issuer]
    assert (sam_a.username, sam_b.username) == ("sam", "sam-2")
    assert (roles.role_of(sam_a), roles.role_of(sam_b)) == ("viewer", "operator")
    assert (sam_a.email, sam_b.email) == ("sam@a.example", "sam@b.example")

    # Signing in again at A is still the first user.
    sso_sign_in(new_page(browser), dashboard_a, provider_a, SAM_A["sub"])
    assert OidcIdentity.objects.count() == 2 and django_user_model.objects.count() == 2


def test_log_out_ends_the_dashboard_session(sso: tuple[Provider, Dashboard], browser: Any) -> None:
    provider, dashboard = sso
    page = new_page(browser)
    sso_sign_in(page, dashboard, provider, OLGA["sub"])
    page.goto(f"{dashboard.url}/namespaces/")
    log_out(page)
    page.goto(f"{dashboard.url}/namespaces/")
    assert "/accounts/login/" in page.url  # signed out: the login page, not a refresh at the provider
    # The provider's own session is not ended by the dashboard's logout: single sign-on signs the
    # user back in without its form.
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    page.get_by_role("button", name="Sign in with single sign-on").click()
    page.wait_for_url(f"{dashboard.url}/")
    assert not [url for url in seen if "/interaction/" in url]
    assert "olga" in user_menu(page)


def test_session_refresh_goes_to_the_provider_and_back_silently(stack: Stack, browser: Any) -> None:
    port = free_port()
    provider = stack.provider("provider-a", [OLGA], [callback(port)])
    dashboard = stack.dashboard(
        "dashboard-a", port, provider, OIDC_OP_ISSUER=provider.issuer, OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS="2"
    )
    page = new_page(browser)
    sso_sign_in(page, dashboard, provider, OLGA["sub"])
    identity = OidcIdentity.objects.get(subject=OLGA["sub"])
    first_login = identity.last_login

    answers: list[tuple[int, str]] = []  # the navigations (documents), not the static files

    def answered(response: Any) -> None:
        if response.request.resource_type == "document":
            answers.append((response.status, response.url))

    page.on("response", answered)
    time.sleep(2.5)  # the renewal interval under test (OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS=2) runs out
    response = page.goto(f"{dashboard.url}/namespaces/?page=1")
    assert response.status == 200 and page.url == f"{dashboard.url}/namespaces/?page=1", answers
    authorize = [url for status, url in answers if url.startswith(f"{provider.issuer}/auth")]
    assert authorize, answers  # it went to the provider ...
    assert parse_qs(urlsplit(authorize[0]).query)["prompt"] == ["none"]  # ... silently
    assert not [url for _, url in answers if "/interaction/" in url]
    assert any(url.startswith(f"{dashboard.url}/oidc/callback/") for _, url in answers)
    assert all(status < 500 for status, _ in answers), answers
    identity.refresh_from_db()
    assert identity.last_login is not None and first_login is not None and identity.last_login > first_login

    # Inside the new interval pages answer at once, without the round trip.
    answers.clear()
    assert page.goto(f"{dashboard.url}/namespaces/").status == 200
    assert [url for _, url in answers] == [f"{dashboard.url}/namespaces/"]
    assert "olga" in user_menu(page)


def test_a_refresh_the_provider_refuses_signs_the_user_out(stack: Stack, browser: Any) -> None:
    """The provider has forgotten the user's session (it restarted: its sessions are in memory), so the
    silent refresh comes back with login_required: the dashboard signs the user out, without an error."""
    port = free_port()
    provider = stack.provider("provider-a", [OLGA], [callback(port)])
    dashboard = stack.dashboard(
        "dashboard-a", port, provider, OIDC_OP_ISSUER=provider.issuer, OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS="2"
    )
    page = new_page(browser)
    sso_sign_in(page, dashboard, provider, OLGA["sub"])
    _stop(provider.proc)
    restarted = stack.provider("provider-a-again", [OLGA], [callback(port)], port=provider.port)
    assert restarted.issuer == provider.issuer
    time.sleep(2.5)  # the renewal interval under test (OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS=2) runs out

    response = page.goto(f"{dashboard.url}/namespaces/")
    assert response.status == 200 and "/accounts/login/" in page.url, page.url
    assert "Sign in with single sign-on" in page.content()
    page.goto(f"{dashboard.url}/namespaces/")
    assert "/accounts/login/" in page.url  # signed out, not only redirected once
