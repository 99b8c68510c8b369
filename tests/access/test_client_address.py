"""The client address holds against an attacker: X-Forwarded-For is read only as far as the trusted
proxies wrote it (TRUSTED_PROXIES), by the API throttles and the login lockout alike; bad credentials
from an address never refuse someone else's valid token there; every Authorization scheme is counted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from axes.models import AccessAttempt
from django.conf import settings as django_settings
from django.test import RequestFactory
from rest_framework.test import APIClient

from access.clientip import client_address, client_network
from access.models import ApiToken
from access.throttles import AnonymousThrottle, TokenFailureThrottle
from tests.access.test_api_auth import URL, assert_401, assert_429, bearer
from tests.fixtures.celery import database_url
from tests.fixtures.waits import ROOT, free_port, wait_until

LOGIN = "/accounts/login/"


def address(settings: Any, proxies: int, remote: str = "10.0.0.1", forwarded: str | None = None) -> str:
    settings.TRUSTED_PROXIES = proxies
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return client_address(RequestFactory().get("/", **extra))


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, None, "10.0.0.1"),
        (0, "203.0.113.7", "10.0.0.1"),  # not behind a proxy: the header is the client's own text
        (1, None, "10.0.0.1"),  # a probe reaching the pod directly
        (1, "203.0.113.7", "203.0.113.7"),
        (1, "6.6.6.6, 203.0.113.7", "203.0.113.7"),  # the client prepended a lie; the Ingress appended
        (1, "6.6.6.6,203.0.113.7 ,", "203.0.113.7"),
        (2, "6.6.6.6, 203.0.113.7, 10.1.0.3", "203.0.113.7"),
        (2, "203.0.113.7", "203.0.113.7"),  # fewer entries than proxies: the farthest one seen
        (1, "6.6.6.6, not-an-address", "10.0.0.1"),  # garbage where a proxy writes: the peer
        (1, "203.0.113.7:4711", "203.0.113.7"),
        (1, "[2001:db8::1]:4711", "2001:db8::1"),
        (1, "2001:DB8:0::1", "2001:db8::1"),
    ],
)
def test_the_client_is_the_entry_the_trusted_proxies_wrote(
    settings: Any, proxies: int, forwarded: str | None, expected: str
) -> None:
    assert address(settings, proxies, forwarded=forwarded) == expected


def test_throttles_count_an_ipv6_client_by_its_network(settings: Any) -> None:
    settings.TRUSTED_PROXIES = 0
    factory = RequestFactory()
    one = client_network(factory.get("/", REMOTE_ADDR="2001:db8:1:2::1"))
    other = client_network(factory.get("/", REMOTE_ADDR="2001:db8:1:2:ffff::9"))
    assert one == other == "2001:db8:1:2::/64"
    assert client_network(factory.get("/", REMOTE_ADDR="::ffff:192.0.2.1")) == "192.0.2.1"
    assert client_network(factory.get("/", REMOTE_ADDR="192.0.2.1")) == "192.0.2.1"


@pytest.mark.django_db
def test_rotating_x_forwarded_for_does_not_evade_the_failure_brake(settings: Any, monkeypatch: Any) -> None:
    """Finding 1: with no trusted proxy, a new X-Forwarded-For per request is still one client."""
    settings.TRUSTED_PROXIES = 0
    monkeypatch.setattr(TokenFailureThrottle, "THROTTLE_RATES", {"token_failures": "3/minute"})
    answers = [
        bearer(f"ldt_{i:012x}_guess").get(URL, HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").status_code for i in range(12)
    ]
    assert answers == [401] * 3 + [429] * 9


@pytest.mark.django_db
def test_rotating_x_forwarded_for_does_not_evade_the_anonymous_throttle(settings: Any, monkeypatch: Any) -> None:
    settings.TRUSTED_PROXIES = 0
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", {"anon": "3/minute"})
    answers = [APIClient().get(URL, HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").status_code for i in range(6)]
    assert answers == [401] * 3 + [429] * 3


@pytest.mark.django_db
def test_behind_one_proxy_the_rightmost_entry_is_the_client(settings: Any, monkeypatch: Any) -> None:
    settings.TRUSTED_PROXIES = 1
    monkeypatch.setattr(TokenFailureThrottle, "THROTTLE_RATES", {"token_failures": "3/minute"})
    ingress = {"REMOTE_ADDR": "10.0.0.1"}
    # A spoofed leftmost entry, new each time, is ignored: the Ingress's entry is the client.
    answers = [
        bearer("nonsense").get(URL, HTTP_X_FORWARDED_FOR=f"6.6.6.{i}, 203.0.113.7", **ingress).status_code
        for i in range(5)
    ]
    assert answers == [401, 401, 401, 429, 429]
    # Another client behind the same Ingress (the same REMOTE_ADDR) is not blocked by that one.
    assert bearer("nonsense").get(URL, HTTP_X_FORWARDED_FOR="203.0.113.8", **ingress).status_code == 401


@pytest.mark.django_db
def test_a_valid_token_keeps_working_from_an_address_under_attack(make_user: Any, monkeypatch: Any) -> None:
    """Finding 2: bad tokens sent from the portal's address (a shared NAT) block the guesser only."""
    monkeypatch.setattr(TokenFailureThrottle, "THROTTLE_RATES", {"token_failures": "3/minute"})
    row, portal = ApiToken.issue(make_user("portal", "viewer"), "portal")
    for text in ("ldt_000000000000_guess", "nonsense", "ldt_123456789abc_guess"):
        assert bearer(text).get(URL).status_code == 401
    for _ in range(5):
        assert_429(bearer("ldt_000000000000_guess").get(URL))
        assert bearer(portal).get(URL).status_code == 200
    # A malformed header is a failure like any other, in the address's bucket.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer two words")
    assert_429(client.get(URL))
    assert bearer(portal).get(URL).status_code == 200
    # Guessing the portal's own secret is braked for that token, and answers alike, right or wrong.
    for _ in range(3):
        assert_401(bearer(f"ldt_{row.prefix}_wrong").get(URL), "invalid token")
    assert_429(bearer(f"ldt_{row.prefix}_wrong").get(URL))
    assert_429(bearer(portal).get(URL))
    assert bearer(portal).get(URL, REMOTE_ADDR="10.0.0.9").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["Basic dmVyYTp4", "Digest username=vera", "Negotiate", "garbage"])
def test_every_other_scheme_is_refused_and_counted_as_anonymous(header: str, monkeypatch: Any) -> None:
    """Finding 3: an unknown scheme no longer skips the anonymous throttle."""
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", {"anon": "3/minute"})
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert_401(client.get(URL), "unsupported authorization scheme: send 'Authorization: Bearer <token>'")
    assert_401(APIClient().get(URL), "Authentication credentials were not provided.")  # the same bucket
    assert client.get(URL).status_code == 401
    assert_429(client.get(URL))
    assert_429(APIClient().get(URL))


@pytest.mark.django_db
def test_a_session_with_a_basic_header_is_still_the_session(make_user: Any, client: Any, monkeypatch: Any) -> None:
    """A proxy in front may add its own Basic header to the browser's requests: the session decides."""
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", {"anon": "1/minute"})
    client.force_login(make_user("vera", "viewer"))
    assert all(client.get(URL, HTTP_AUTHORIZATION="Basic dmVyYTp4").status_code == 200 for _ in range(3))


def fail_login(client: Any, username: str, **extra: Any) -> int:
    return int(client.post(LOGIN, {"username": username, "password": "wrong"}, **extra).status_code)


@pytest.mark.django_db
def test_the_login_lockout_does_not_trust_x_forwarded_for(make_user: Any, client: Any, settings: Any) -> None:
    settings.TRUSTED_PROXIES = 0
    make_user("vera", "viewer")
    limit = settings.AXES_FAILURE_LIMIT
    answers = [fail_login(client, "vera", HTTP_X_FORWARDED_FOR=f"198.51.100.{i}") for i in range(limit + 2)]
    assert answers == [200] * (limit - 1) + [429] * 3
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"127.0.0.1"}


@pytest.mark.django_db
def test_the_login_lockout_locks_the_pair_not_the_victim(make_user: Any, client: Any, settings: Any) -> None:
    settings.TRUSTED_PROXIES = 1
    make_user("vera", "viewer")
    limit = settings.AXES_FAILURE_LIMIT
    # The attacker at 203.0.113.66, with a new spoofed entry each time, hammers vera's name.
    answers = [fail_login(client, "vera", HTTP_X_FORWARDED_FOR=f"6.6.6.{i}, 203.0.113.66") for i in range(limit + 2)]
    assert answers == [200] * (limit - 1) + [429] * 3
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.66"}
    # Vera, behind the same Ingress but at her own address, signs in.
    response = client.post(
        LOGIN, {"username": "vera", "password": "vera-password-123"}, HTTP_X_FORWARDED_FOR="203.0.113.5"
    )
    assert response.status_code == 302


# --- Over real HTTP: the web process started with TRUSTED_PROXIES in its environment -------------------


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def web(transactional_db: Any, tmp_path: Path) -> Iterator[str]:
    """gunicorn as the manifests run it (deploy/gunicorn.conf.py), one worker so its local-memory
    cache holds every throttle, behind one trusted proxy."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "liqo_dash.settings_test",  # its password hasher made the users
        "DATABASE_URL": database_url(),
        "LIQO_DASH_VAR_DIR": str(django_settings.VAR_DIR),  # the same SECRET_KEY: the token hashes match
        "LIQO_DASH_LOCAL_CACHE": "true",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "INSECURE_HTTP": "true",
        "TRUSTED_PROXIES": "1",
        "API_THROTTLE_TOKEN_FAILURES": "3/minute",
        "API_THROTTLE_ANON": "1000/minute",
        "AXES_FAILURE_LIMIT": "3",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("API_TOKEN_PEPPER", None)
    log = open(tmp_path / "web.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
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
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or _answers(f"{base}/healthz"), 60, message="gunicorn")
        assert proc.poll() is None, (tmp_path / "web.log").read_text()
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def test_the_web_process_keys_throttles_and_lockout_on_the_proxys_entry(
    web: str, make_user: Any, settings: Any
) -> None:
    _row, portal = ApiToken.issue(make_user("portal", "viewer"), "portal")
    make_user("vera", "viewer")

    def api(token: str, forwarded: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}"}
        if forwarded is not None:
            headers["X-Forwarded-For"] = forwarded
        return requests.get(f"{web}{URL}", headers=headers, timeout=10).status_code

    # The attacker at 203.0.113.66 rotates the entry it writes itself: still one client.
    answers = [api("ldt_000000000000_guess", f"6.6.6.{i}, 203.0.113.66") for i in range(6)]
    assert answers == [401, 401, 401, 429, 429, 429]
    # The portal behind the same address keeps working; another client is not blocked.
    assert api(portal, "6.6.6.6, 203.0.113.66") == 200
    assert api("ldt_000000000000_guess", "203.0.113.8") == 401
    # Without the header (a client inside the cluster) the peer is the client.
    assert api("ldt_000000000000_guess", None) == 401

    def login(username: str, password: str, forwarded: str) -> requests.Response:
        session = requests.Session()
        form = session.get(f"{web}{LOGIN}", timeout=10).text
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert match, form
        return session.post(
            f"{web}{LOGIN}",
            data={"username": username, "password": password, "csrfmiddlewaretoken": match.group(1)},
            headers={"X-Forwarded-For": forwarded},
            allow_redirects=False,
            timeout=10,
        )

    codes = [login("vera", "wrong", f"6.6.6.{i}, 203.0.113.66").status_code for i in range(4)]
    assert codes == [200, 200, 429, 429]
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.66"}
    assert login("vera", "vera-password-123", "203.0.113.5").status_code == 302
