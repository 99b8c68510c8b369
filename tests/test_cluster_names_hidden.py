"""Whether a name is a managed cluster is told only to those a cluster's pages and API would serve
(offloading/switcher.py, issue 28): every page and resource copied under ``/m/<name>/`` and
``/api/v1/m/<name>/`` answers an unknown name exactly as a known one until the view would read the
cluster (sign-in page, 401, 403, 405, 429, with the same bodies and headers), then a 404."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from access.models import ApiToken
from offloading import switcher
from tests.fleet_snapshot import write_turin

pytestmark = pytest.mark.django_db

KNOWN, UNKNOWN = "turin", "nowhere"
SNAPSHOT_HEADERS = ("X-Snapshot-Stale", "X-Snapshot-Refreshed-At")


def _example(route: str) -> str:
    """A path of ``route`` (a copied pattern, path or regular-expression syntax) with example values."""
    values = {"pk": "1", "format": "json"}
    route = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: values.get(m.group(1), "shop"), route)
    route = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values.get(m.group(1), "shop"), route)
    return route.replace("^", "").replace("$", "").replace("\\.", ".").replace("/?", "/")


def _copied(api: bool) -> Iterator[str]:
    """Every page (or API) route copied under the cluster prefix, with ``{}`` for the cluster's name."""
    for top in get_resolver().url_patterns:
        if not isinstance(top, URLResolver) or switcher.ROUTE not in str(top.pattern):
            continue
        if str(top.pattern).startswith("api/") != api:
            continue
        for pattern in top.url_patterns:
            assert isinstance(pattern, URLPattern)
            yield "/" + str(top.pattern).replace(switcher.ROUTE, "m/{}/") + _example(str(pattern.pattern))


def _answer(client: Client, method: str, path: str, name: str, **headers: Any) -> tuple[Any, ...]:
    """What a caller sees of an answer, the cluster's name written as X."""
    cache.clear()  # the throttles' counters: each answer is compared with its twin's, not with a throttled one
    response = getattr(client, method)(path.format(name), **headers)
    body = b"" if response.streaming else response.content
    body = re.sub(rb"[A-Za-z0-9]{64}", b"<csrf token>", body)  # each response's own masked CSRF token
    return (
        response.status_code,
        response.get("Location", "").replace(name, "X"),
        response.get("WWW-Authenticate", ""),
        response.get("Content-Type", ""),
        body.decode(errors="replace").replace(name, "X") if response.status_code != 302 else "",
        tuple(h for h in SNAPSHOT_HEADERS if response.has_header(h)),
    )


@pytest.fixture
def two_clusters(fleet: Any) -> None:
    write_turin()  # a known cluster besides the default one, with its own snapshot (and refresh time)


@pytest.fixture
def role_less(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("nobody", password="nobody-pass")


@pytest.mark.usefixtures("two_clusters")
def test_every_cluster_page_signs_a_stranger_in_whatever_the_name(role_less: Any) -> None:
    paths = list(_copied(api=False))
    assert len(paths) > 30  # every page family of a cluster, not a handful
    signed_in = Client()
    signed_in.force_login(role_less)
    for path in paths:
        for method in ("get", "post"):
            for client, headers in (
                (Client(), {}),
                # Pages read no API token: one sent along changes nothing (it used to turn the unknown name's
                # answer into a 404).
                (Client(), {"HTTP_AUTHORIZATION": "Bearer ldt_abc_def"}),
                (signed_in, {}),  # no role: the same "no role" page for both, without the cluster switcher
            ):
                known = _answer(client, method, path, KNOWN, **headers)
                assert known[0] in (302, 403), (path, method, known)
                assert _answer(client, method, path, UNKNOWN, **headers) == known, (path, method, headers)
                assert "cluster-switcher" not in known[4], path


@pytest.mark.usefixtures("two_clusters")
def test_every_cluster_resource_refuses_an_unknown_name_as_a_known_one(role_less: Any, django_user_model: Any) -> None:
    paths = list(_copied(api=True))
    assert len(paths) > 30
    _, role_less_token = ApiToken.issue(role_less, "no role")
    viewer = django_user_model.objects.create_user("vera", password="vera-pass")
    viewer.groups.add(Group.objects.get(name="viewer"))
    _, viewer_token = ApiToken.issue(viewer, "reads")
    callers: dict[str, dict[str, Any]] = {
        "no credentials": {},
        "a bad token": {"HTTP_AUTHORIZATION": "Bearer ldt_abcdefgh_notasecret"},
        "another scheme": {"HTTP_AUTHORIZATION": "Basic Zm9vOmJhcg=="},
        "a role-less token": {"HTTP_AUTHORIZATION": f"Bearer {role_less_token}"},
    }
    for path in paths:
        for method in ("get", "post", "delete"):
            for caller, headers in callers.items():
                known = _answer(Client(), method, path, KNOWN, **headers)
                assert known[0] in (401, 403), (path, method, caller, known)
                assert known[5] == (), (path, caller)  # no snapshot time: it would tell turin's from the default's
                assert _answer(Client(), method, path, UNKNOWN, **headers) == known, (path, method, caller)
        # A viewer's write is refused by the role before any cluster is read: the same 403 for both names.
        bearer: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {viewer_token}"}
        known = _answer(Client(), "delete", path, KNOWN, **bearer)
        assert known[0] in (403, 405), (path, known)
        # (the viewer may read snapshots, so a known cluster's answer says its freshness)
        assert _answer(Client(), "delete", path, UNKNOWN, **bearer)[:5] == known[:5], path


@pytest.mark.usefixtures("two_clusters")
def test_only_a_caller_the_view_serves_learns_the_name_is_unknown(role_less: Any, admin_user: Any) -> None:
    _, token = ApiToken.issue(admin_user, "admin")
    bearer: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    api = Client()
    known = api.get(f"/api/v1/m/{KNOWN}/namespaces/", **bearer)
    assert known.status_code == 200 and known.has_header("X-Snapshot-Refreshed-At")
    unknown = api.get(f"/api/v1/m/{UNKNOWN}/namespaces/", **bearer)
    body = unknown.json()
    assert unknown.status_code == 404 and body["reason"] == "NotFound"
    assert body["message"] == f'managedclusters "{UNKNOWN}" not found'
    assert body["details"] == {"causes": [], "name": UNKNOWN, "kind": "managedclusters"}
    assert not any(unknown.has_header(h) for h in SNAPSHOT_HEADERS)  # not the default cluster's snapshot
    # The same for every method the view takes, and a method it does not take is its 405 for both.
    assert api.delete(f"/api/v1/m/{UNKNOWN}/namespaces/shop/offloading/?confirm=true", **bearer).status_code == 404
    assert api.delete(f"/api/v1/m/{KNOWN}/namespaces/", **bearer).status_code == 405
    assert api.delete(f"/api/v1/m/{UNKNOWN}/namespaces/", **bearer).status_code == 405
    pages = Client()
    pages.force_login(admin_user)
    page = pages.get(f"/m/{UNKNOWN}/namespaces/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    assert pages.get(f"/m/{KNOWN}/namespaces/").status_code == 200
    # A stranger's 401 carries no snapshot time on the default's paths either.
    assert not any(Client().get("/api/v1/namespaces/").has_header(h) for h in SNAPSHOT_HEADERS)


@pytest.mark.usefixtures("two_clusters")
def test_the_anonymous_throttle_counts_unknown_names_too(settings: Any) -> None:
    """Guessing names is braked like any anonymous request: an unknown name's requests fill the address's
    bucket, and once it is full both names answer 429 alike (a 401 for one, 429 for the other would tell)."""
    limit = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon"].split("/")[0])
    client = Client()
    for _ in range(limit):
        assert client.get(f"/api/v1/m/{UNKNOWN}/namespaces/").status_code == 401
    for name in (UNKNOWN, KNOWN):
        throttled = client.get(f"/api/v1/m/{name}/namespaces/")
        assert throttled.status_code == 429 and throttled.has_header("Retry-After"), name
        assert throttled.json()["reason"] == "TooManyRequests"
