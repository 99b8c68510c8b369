"""Hypothesis over every route of the URL conf under /api/: random query parameters and headers (bytes a
WSGI server can hand over, non-ASCII included), every method; none answers a 5xx."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from access.models import ApiToken

pytestmark = pytest.mark.django_db

_SAMPLE = {"name": "shop", "pk": "1", "clusterId": "milan", "format": "json"}


def _routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        text = prefix + str(pattern.pattern).lstrip("^").rstrip("$")
        if isinstance(pattern, URLResolver):
            found.extend(_routes(pattern.url_patterns, text))
        elif isinstance(pattern, URLPattern):
            found.append(text)
    return found


def _concrete(route: str) -> str:
    for name, value in _SAMPLE.items():
        route = route.replace(f"(?P<{name}>[^/.]+)", value).replace(f"(?P<{name}>[^/]+)", value)
        route = route.replace(f"<{name}>", value).replace(f"<str:{name}>", value)
    return "/" + route.replace("//", "/")


# Every route under /api/ (format-suffix variants are the same views).
API_ROUTES = sorted(
    {_concrete(r) for r in _routes(get_resolver().url_patterns) if r.startswith("api/")} - {""},
    key=str,
)
API_ROUTES = [r for r in API_ROUTES if "(?P" not in r and "<" not in r]
_latin1 = st.text(st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=40)
_token = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20)


def test_the_url_conf_has_api_routes_to_fuzz() -> None:
    assert "/api/v1/namespaces/shop/offloading/" in API_ROUTES and "/api/v1/snapshot/" in API_ROUTES


@pytest.mark.parametrize("route", API_ROUTES)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    method=st.sampled_from(["get", "put", "post", "delete", "patch", "options"]),
    query=st.dictionaries(
        st.sampled_from(["selector", "phase", "offloaded", "limit", "offset", "q", "cluster", "x"]) | _token,
        _latin1,
        max_size=3,
    ),
    headers=st.dictionaries(
        st.sampled_from(["If-Match", "X-Request-ID", "Accept", "Content-Type", "X-Forwarded-For"]), _latin1, max_size=3
    ),
)
def test_no_query_or_header_makes_a_route_answer_5xx(
    route: str,
    method: str,
    query: dict[str, str],
    headers: dict[str, str],
    admin_user: Any,
    fleet: Any,
) -> None:
    client = APIClient()
    _row, text = ApiToken.issue(admin_user, "fuzz")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {text}")
    meta = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}
    meta.pop("HTTP_CONTENT_TYPE", None)
    url = f"{route}?{urlencode(query)}" if query else route
    response = getattr(client, method)(url, **meta)
    assert response.status_code < 500, (method, route, query, headers, response.content[:300])
